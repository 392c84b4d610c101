"""Rate limits on Redis (``RateLimitStore``): the part of ``RedisStorage`` that keeps the release
budgets of queues and tasks and reserves their slots.

Key: ``limits`` (hash: ``queue:<name>`` or ``task:<name>`` -> ``<count> <period> <burst>
<set_at> <tat> <set_by>``; ``tat`` is ``-`` until the first reservation, ``set_by`` is last since
it may hold spaces). One key under the prefix's hash tag, so on a Redis Cluster it shares the slot
of every other key of the store and each script touches one node.

A reservation is one script (``lua/reserve_slots.lua``) on the server's clock: it reads the
limit, computes the slots exactly as ``gcra.reserve_slots`` does and writes the new ``tat``, with
no other client in between, so two schedulers never get one slot. ``defer``
(``lua/defer.lua``) gives claims back due at their slots, fenced per claim token as ``settle``,
and keeps each slot in the job's hash as ``slot_at``, which the claim scripts return.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_adapters.checks.pauses import check_pause_name
from storage_adapters.checks.rate_limits import (
    check_deferral,
    check_rate_limit,
    check_reservation,
)
from storage_adapters.records import (
    ClaimedJob,
    JobState,
    PauseKind,
    RateLimitRecord,
    Reservation,
)
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["RATE_LIMIT_SCRIPTS", "RedisRateLimitStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
RATE_LIMIT_SCRIPTS = (
    "put_rate_limit",
    "remove_rate_limit",
    "list_rate_limits",
    "reserve_slots",
    "defer",
    "requeue_waiting",
)
#: Members of the due (or held) set one ``requeue_waiting`` script examines, as a pause sweep.
REQUEUE_CHUNK = 5000


def _record(field: str, value: str, now: float) -> RateLimitRecord | None:
    """A limit as ``lua/put_rate_limit.lua`` stores it, its ``free_at`` against ``now``: the slot
    the next job would get, ``max(tat - (burst - 1) * interval, now)``, when later than now.
    ``None`` for a field or value written by hand that cannot be read (listing must not crash)."""
    kind, _, name = field.partition(":")
    parts = value.split(" ", 5)
    if len(parts) != 6:
        return None
    count, period, burst, set_at, tat, set_by = parts
    try:
        numbers = int(count), float(period), int(burst)
        free = None if tat == "-" else float(tat) - (numbers[2] - 1) * (numbers[1] / numbers[0])
        return RateLimitRecord(
            PauseKind(kind),
            name,
            *numbers,
            set_by,
            float(set_at),
            free if free is not None and free > now else None,
        )
    except (ValueError, ZeroDivisionError):
        return None


class RedisRateLimitStore(RedisPlumbing):
    """Set, end, list and spend rate limits, and defer claims to their slots, for
    ``RedisStorage`` to inherit."""

    def set_rate_limit(
        self, kind: PauseKind, name: str, count: int, period: float, burst: int, set_by: str
    ) -> None:
        checked, name, count, period, burst, set_by = check_rate_limit(
            kind, name, count, period, burst, set_by
        )
        args = [f"{checked.value}:{name}", str(count), repr(period), str(burst), set_by]
        self._run("put_rate_limit", [self._key("limits")], args)

    def remove_rate_limit(self, kind: PauseKind, name: str) -> bool:
        checked, name = check_pause_name(kind, name)
        field = f"{checked.value}:{name}"
        return bool(self._run("remove_rate_limit", [self._key("limits")], [field]))

    def requeue_waiting(self, kind: PauseKind, name: str) -> int:
        checked, name = check_pause_name(kind, name)
        field = f"{checked.value}:{name}"
        limits = self._key("limits")
        placed = 0
        # the first chunk of the due set also forgets the limit's reserved slots
        for source, forget in (
            (self._key("schedule"), field),
            (self._state_key(JobState.HELD), ""),
        ):
            after: tuple[str, str] = ("", "")
            while True:
                args = [self._key("job:"), checked.value, name, *after, REQUEUE_CHUNK, placed]
                keys = [source, self._key("all"), limits]
                examined, moved, score, member = self._run("requeue_waiting", keys, [*args, forget])
                placed += int(moved)
                if int(examined) < REQUEUE_CHUNK:
                    break
                after, forget = (score, member), ""
        return placed

    def list_rate_limits(self) -> list[RateLimitRecord]:
        now, *flat = self._run("list_rate_limits", [self._key("limits")], [])
        records = [_record(flat[i], flat[i + 1], float(now)) for i in range(0, len(flat), 2)]
        found = [record for record in records if record is not None]
        return sorted(found, key=lambda limit: (limit.kind.value, limit.name))

    def reserve_release_slots(self, kind: PauseKind, name: str, count: int) -> Reservation | None:
        checked, name, count = check_reservation(kind, name, count)
        field = f"{checked.value}:{name}"
        reply = self._run("reserve_slots", [self._key("limits")], [field, count])
        if not reply:
            return None
        return Reservation(float(reply[0]), tuple(float(slot) for slot in reply[1:]))

    def after_deferring(self, deferred: int) -> None:
        """Nothing to tidy: a sorted set has no dead entries."""

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> list[str]:
        dues, note = check_deferral(claims, due_ats, note)
        if not claims:
            return []
        keys = [
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            self._key("schedule"),
            self._key("all"),
            *self._pause_keys(),
        ]
        args = [self._key("job:"), note]
        for claim, due in zip(claims, dues, strict=True):
            args += (claim.id, str(claim.token), repr(due))
        return list(self._run("defer", keys, args))
