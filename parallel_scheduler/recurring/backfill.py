"""Backfill: fire every tick of a past range of a recurring job, each exactly once.

A backfilled tick is the same job a scheduled firing of that tick would have been: id
``<id>@<tick>``, due at the tick moved by the schedule's jitter, stored through the same
idempotent ``add_jobs``. So a backfill run twice, a backfill over ticks that already fired, and
a scheduler firing a tick while it is backfilled all leave one job per tick. Backfilled jobs are
due in the past, so the delayed scheduler releases them at its next pass; the recurring job's
next run, last run and recent firings are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.firing_ids import firing_id
from parallel_scheduler.jobs import display_instant
from parallel_scheduler.queues import QueueRouter, payload_queue
from parallel_scheduler.recurring.triggers import Schedule, firing_due_at, next_tick
from storage_adapters import NewJob, RecurringRecord, Storage

__all__ = ["BACKFILL_LIMIT", "Backfill", "backfill"]

#: The most ticks one backfill fires; a longer range is refused (backfill it in parts).
BACKFILL_LIMIT = 10_000
#: Ticks written per storage call.
_CHUNK = 1_000


@dataclass(frozen=True)
class Backfill:
    """What a backfill did: the ticks of the range, how many jobs it created, and how many
    were there already (fired by a scheduler or an earlier backfill)."""

    ticks: int
    created: int
    existing: int

    def to_dict(self) -> dict[str, int]:
        return {"ticks": self.ticks, "created": self.created, "existing": self.existing}


def backfill(
    storage: Storage,
    call: Callable[[Callable[[], list[bool]]], list[bool]],
    record: RecurringRecord,
    start: datetime,
    end: datetime,
    now: float,
    route: QueueRouter | None = None,
) -> Backfill:
    """Fire every tick of ``record`` from ``start`` to ``end`` (both included, both aware and
    not after ``now``, the storage clock); ``InvalidJobError`` names what is wrong, and then
    nothing is written. ``route``: the queue of a call whose options name none (``queues.py``)."""
    low, high = _instant(start, "from"), _instant(end, "to")
    if high < low:
        raise InvalidJobError(
            f"backfill 'to' {display_instant(high)} is before 'from' {display_instant(low)}"
        )
    if high > now:
        raise InvalidJobError(
            f"backfill 'to' {display_instant(high)} is in the future (now "
            f"{display_instant(now)}): future ticks fire on their own"
        )
    schedule = _schedule(record)
    ticks = _ticks(schedule, low, high)
    queue = payload_queue(record.task, record.payload, route)
    jobs = [
        NewJob(firing_id(record.id, tick), record.task, record.payload,
               firing_due_at(record.id, schedule, tick), queue=queue)
        for tick in ticks
    ]  # fmt: skip
    created = sum(
        sum(call(partial(storage.add_jobs, jobs[first : first + _CHUNK])))
        for first in range(0, len(jobs), _CHUNK)
    )
    return Backfill(len(ticks), created, len(ticks) - created)


def _instant(moment: object, name: str) -> float:
    if not isinstance(moment, datetime):
        raise InvalidJobError(f"backfill {name!r} must be a datetime, not {type(moment).__name__}")
    if moment.tzinfo is None:
        raise InvalidJobError(f"backfill {name!r} {moment.isoformat()} has no time zone")
    return moment.timestamp()


def _schedule(record: RecurringRecord) -> Schedule:
    try:
        return Schedule.from_json(record.schedule)
    except InvalidJobError as exc:
        raise InvalidJobError(f"recurring job {record.id!r} cannot be backfilled: {exc}") from None


def _ticks(schedule: Schedule, low: float, high: float) -> list[float]:
    """The schedule's ticks in ``[low, high]``, refused past ``BACKFILL_LIMIT``."""
    ticks: list[float] = []
    tick = next_tick(schedule, math.nextafter(low, -math.inf))
    while tick is not None and tick <= high:
        if len(ticks) == BACKFILL_LIMIT:
            raise InvalidJobError(
                f"the range {display_instant(low)} to {display_instant(high)} holds more than "
                f"{BACKFILL_LIMIT} ticks of {schedule.describe()}: backfill it in parts"
            )
        ticks.append(tick)
        tick = next_tick(schedule, tick)
    return ticks
