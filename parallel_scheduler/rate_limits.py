"""Rate limits of a queue or a task as people meet them: the one home of a rate's text
(``"100/s"``, ``"100/m"``, ``"100/h"``: ``parse_rate`` and ``rate_text``), the JSON shape of a
limit in force (``queue list --json``, ``GET /api/v1/limits``), the words that say what setting
or removing one did (the command line and the dashboard), and the ``Client`` methods
(``RateLimiting``: ``limit_queue``, ``limit_task``, ``unlimit_queue``, ``unlimit_task``,
``rate_limits``). Storage keeps the limits and checks their numbers (``RateLimitStore``,
``checks/rate_limits.py``); every scheduler process and shard spends from the one budget there.

A rate is ``COUNT/UNIT``: ``COUNT`` a whole number of 1-1,000,000, ``UNIT`` ``s`` (also ``sec``),
``m`` (``min``) or ``h`` (``hour``), nothing else (no spaces). Anything else is refused with
``InvalidArgumentError`` naming the text, before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.pausing import pauser
from parallel_scheduler.ranges import instant
from storage_adapters import InvalidArgumentError, PauseKind, RateLimitRecord, Storage
from storage_adapters.checks.pauses import check_pause_name
from storage_adapters.checks.rate_limits import MAX_RATE_COUNT, check_rate_limit

__all__ = [
    "RATE_PATTERN",
    "RATE_UNITS",
    "RateLimiting",
    "checked_limit",
    "limit_name",
    "limit_view",
    "limited_text",
    "limited_view",
    "parse_burst",
    "parse_rate",
    "rate_text",
    "unlimited_text",
]

T = TypeVar("T")

#: The units a rate may name, with their seconds.
RATE_UNITS: Final = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
#: How each period is said back: the short unit.
_SHORT: Final = {1.0: "s", 60.0: "m", 3600.0: "h"}
_RATE = re.compile(r"(?P<count>[^/]*)/(?P<unit>[^/]*)")
#: The rates ``parse_rate`` takes, as a JSON Schema pattern (the HTTP API's document).
RATE_PATTERN: Final = "^[0-9]{1,7}/(s|sec|m|min|h|hour)$"
_WHOLE = re.compile(r"[0-9]{1,7}")
_EXAMPLE = "e.g. 100/s, 100/m or 100/h"


def parse_rate(rate: object) -> tuple[int, float]:
    """``"100/s"`` -> ``(100, 1.0)``; ``"100/m"`` -> ``(100, 60.0)``; ``"100/h"`` ->
    ``(100, 3600.0)``. Raises ``InvalidArgumentError`` naming the bad text."""
    if not isinstance(rate, str):
        raise InvalidArgumentError(f"a rate is text ({_EXAMPLE}), not {rate!r}")
    shown = rate if len(rate) <= 40 else rate[:40] + "…"
    found = _RATE.fullmatch(rate)
    if found is None:
        raise InvalidArgumentError(f"a rate is COUNT/UNIT ({_EXAMPLE}), not {shown!r}")
    count, unit = found["count"], found["unit"]
    if not _WHOLE.fullmatch(count) or not 1 <= int(count) <= MAX_RATE_COUNT:
        raise InvalidArgumentError(
            f"a rate's count must be a whole number of 1-{MAX_RATE_COUNT:,}, "
            f"not {count!r} (in {shown!r})"
        )
    if unit not in RATE_UNITS:
        raise InvalidArgumentError(
            f"a rate's unit is s, m or h (also sec, min, hour), not {unit!r} (in {shown!r})"
        )
    return int(count), RATE_UNITS[unit]


def parse_burst(burst: object, typed: bool = True) -> int:
    """A burst: a number, or (``typed``: a form field, an option) its digits; anything else is
    refused in the words storage's checks use for a bad number."""
    if typed and isinstance(burst, str) and _WHOLE.fullmatch(burst.strip()):
        burst = int(burst.strip())
    if type(burst) is not int or not 1 <= burst <= MAX_RATE_COUNT:
        raise InvalidArgumentError(
            f"a rate limit's burst must be a whole number of 1-{MAX_RATE_COUNT:,}, not {burst!r}"
        )
    return burst


def rate_text(count: int, period: float) -> str:
    """``100/s``, ``100/m``, ``100/h``; any other period (set through storage directly) as
    ``100 per 30 s``."""
    short = _SHORT.get(float(period))
    return f"{count}/{short}" if short else f"{count} per {period:g} s"


def limit_name(kind: object, name: object) -> tuple[PauseKind, str]:
    """What a limit names, checked as a pause's name is (``check_pause_name``), in a limit's
    words."""
    if not isinstance(kind, str) or kind not in {k.value for k in PauseKind}:
        raise InvalidArgumentError(f"a rate limit names a 'queue' or a 'task', not {kind!r}")
    return check_pause_name(kind, name)


def checked_limit(
    kind: object, name: object, rate: object, burst: object, by: str | None, typed: bool = True
) -> tuple[PauseKind, str, int, float, int, str]:
    """All of a new limit, checked as storage will check it: what ``set_rate_limit`` takes
    (``typed``: the burst may be its digits)."""
    checked, checked_name = limit_name(kind, name)
    count, period = parse_rate(rate)
    burst = parse_burst(burst, typed)
    return check_rate_limit(checked, checked_name, count, period, burst, pauser(by))


def limited_view(
    kind: PauseKind, name: str, count: int, period: float, burst: int, set_by: str
) -> dict[str, Any]:
    """A limit's numbers as a JSON-ready dict: the answer to setting one."""
    return {
        "kind": kind.value,
        "name": name,
        "rate": rate_text(count, period),
        "count": count,
        "period": period,
        "per_second": count / period,
        "burst": burst,
        "set_by": set_by,
    }


def limit_view(limit: RateLimitRecord) -> dict[str, Any]:
    """One limit in force as a JSON-ready dict: its numbers, who set it and when, and
    ``free_at``, when the next job of it may go (``null`` or past: now). Times are ISO 8601 UTC."""
    view = limited_view(
        limit.kind, limit.name, limit.count, limit.period, limit.burst, limit.set_by
    )
    view["set_at"] = instant("set_at", limit.set_at, [])
    view["free_at"] = instant("free_at", limit.free_at, [])
    return view


def limited_text(kind: str, name: str, count: int, period: float, burst: int) -> str:
    """``limited queue 'emails' to 100/s (burst 1)``."""
    return f"limited {kind} {name!r} to {rate_text(count, period)} (burst {burst:,})"


def unlimited_text(kind: str, name: str, removed: bool) -> str:
    """``removed the rate limit of queue 'emails'``, or that there was none."""
    if not removed:
        return f"{kind} {name!r} had no rate limit: nothing changed"
    return f"removed the rate limit of {kind} {name!r}"


class RateLimiting:
    """The ``Client``'s rate-limit methods (the client supplies ``storage``, ``retry_for`` and
    ``_verify_shards``). A limit of ``count`` per period lets one job of the queue or task go
    every ``period / count`` seconds, up to ``burst`` at once after a quiet spell: one budget in
    storage, spent by every scheduler process and shard as it releases jobs; jobs over the
    budget wait scheduled, in due order, and go as it refills."""

    storage: Storage
    retry_for: float

    def _verify_shards(self) -> None:
        """The client's check of the store's shard count, before its first write."""

    def _limits_call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self.retry_for)

    def limit(
        self,
        kind: PauseKind | str,
        name: str,
        rate: str,
        burst: int = 1,
        by: str | None = None,
    ) -> None:
        """Put a rate limit on a queue or a task, or replace its rate, burst and ``by``. Jobs
        already waiting for a slot of it are due again at once, in their order, and take slots
        of the new rate (``requeue_waiting``), so raising a limit speeds up the queue at once.

        :param kind: ``"queue"`` (the jobs stored with that queue) or ``"task"`` (that task name).
        :param rate: ``"100/s"``, ``"100/m"`` or ``"100/h"`` (``parse_rate``).
        :param burst: How many jobs may go at once after a quiet spell (1-1,000,000).
        :param by: Who set it (at most 255 characters); default ``user@host`` of this process.
        :raises InvalidArgumentError: A bad kind, name, rate, burst or ``by``; nothing is written.
        """
        checked = checked_limit(kind, name, rate, burst, by, typed=False)
        self._verify_shards()
        self._limits_call(lambda: self.storage.set_rate_limit(*checked))
        self._limits_call(lambda: self.storage.requeue_waiting(checked[0], checked[1]))

    def unlimit(self, kind: PauseKind | str, name: str) -> bool:
        """End a rate limit; ``False`` when none was in force. Jobs that were waiting for a slot
        of it are due again at once, in their order."""
        checked = limit_name(kind, name)
        self._verify_shards()
        removed = self._limits_call(lambda: self.storage.remove_rate_limit(*checked))
        self._limits_call(lambda: self.storage.requeue_waiting(*checked))
        return removed

    def limit_queue(self, name: str, rate: str, burst: int = 1, by: str | None = None) -> None:
        """``limit("queue", ...)``: at most ``rate`` releases of the jobs sent to queue ``name``."""
        self.limit(PauseKind.QUEUE, name, rate, burst, by)

    def limit_task(self, name: str, rate: str, burst: int = 1, by: str | None = None) -> None:
        """``limit("task", ...)``: at most ``rate`` releases of the jobs of task ``name``."""
        self.limit(PauseKind.TASK, name, rate, burst, by)

    def unlimit_queue(self, name: str) -> bool:
        """``unlimit("queue", name)``: ``False`` when the queue had no limit."""
        return self.unlimit(PauseKind.QUEUE, name)

    def unlimit_task(self, name: str) -> bool:
        """``unlimit("task", name)``: ``False`` when the task had no limit."""
        return self.unlimit(PauseKind.TASK, name)

    def rate_limits(self) -> list[RateLimitRecord]:
        """Every rate limit in force (kind, name, count per period, burst, who, since when, when
        the next job may go), by kind and name."""
        return self._limits_call(self.storage.list_rate_limits)
