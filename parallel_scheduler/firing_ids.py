"""The ids of recurring firings, and the id form reserved for them.

A firing of recurring job ``R`` at tick ``T`` is an ordinary delayed job with the id
``R@<T in UTC, ISO 8601, seconds>Z`` (``nightly-report@2026-11-30T02:00:00Z``); a manual trigger
gets ``R@trigger-<UTC time to the microsecond>Z``. The id is the firing's idempotency key: a pass
that finds it stored counts the tick as fired. So no caller may create such an id through
``schedule()``, or a job named ``R@T`` would pre-empt that tick with its own task. The reserved
form is: the text after the id's last ``@`` is a UTC time to the second ending in ``Z``
(``2026-11-30T02:00:00Z``), or starts with ``trigger-``. Other ids with ``@`` (an e-mail address,
``user@example.com-welcome``) stay valid. Recurring job ids themselves never contain ``@``.

This module imports nothing from the job model, so ``jobs.JobSpec.encode`` can check ids here.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

from parallel_scheduler.errors import InvalidJobError
from storage_adapters.sharding import FIRING_ID_SUFFIX

__all__ = ["check_not_reserved", "firing_id", "is_reserved", "trigger_id"]

#: The reserved form's one home is storage's: a sharded store keeps a firing in its recurring
#: job's shard by that same form (storage_adapters/sharding.py).
_RESERVED = FIRING_ID_SUFFIX


def _iso(epoch: float, timespec: str) -> str:
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z")


@lru_cache(maxsize=4096)
def _tick_text(tick: float) -> str:
    """A tick as firing ids name it; remembered, since a pass fires many jobs at one tick."""
    return _iso(tick, "seconds")


def firing_id(recurring_id: str, tick: float) -> str:
    """The id of the firing of ``recurring_id`` at ``tick``; the same in every process."""
    return f"{recurring_id}@{_tick_text(tick)}"


def trigger_id(recurring_id: str, now: float) -> str:
    """The id of a manual trigger of ``recurring_id`` at ``now``."""
    return f"{recurring_id}@trigger-{_iso(now, 'microseconds')}"


def is_reserved(job_id: str) -> bool:
    """True when ``job_id`` has the form of a recurring firing's or trigger's id."""
    return _RESERVED.search(job_id) is not None


def check_not_reserved(job_id: str) -> None:
    """``InvalidJobError`` when a caller's job id has the form reserved for recurring firings."""
    if is_reserved(job_id):
        raise InvalidJobError(
            f"job id {job_id!r} has the form reserved for recurring firings "
            "('<recurring id>@<UTC time>Z' or '<recurring id>@trigger-...'); choose another id"
        )
