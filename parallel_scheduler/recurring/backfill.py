"""Backfill: fire every tick of a past range of a recurring job, each exactly once.

A backfilled tick is the same job a scheduled firing of that tick would have been: id
``<id>@<tick>``, due at the tick moved by the schedule's jitter, stored through the same
idempotent ``add_jobs``. So a backfill run twice, a backfill over ticks that already fired, and
a scheduler firing a tick while it is backfilled all leave one job per tick. Backfilled jobs are
due in the past, so the delayed scheduler releases them at its next pass; the recurring job's
next run, last run and recent firings are left as they are. A tick on a date one of the job's
calendars excludes is not fired, as the scheduler would not have fired it.

``overlap`` (``overlap.py``'s rule for what runs): ``allow`` (the default) fires every tick at
once. ``skip`` fires only the range's latest tick, and nothing when a firing of the job runs.
``buffer_one`` fires the ticks one after another, earliest first, each once the one before has
finished (a final outcome, or ``overlap_timeout`` seconds after it was fired), the first once no
kept firing of the job runs: the call returns when the last one is fired.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from parallel_scheduler.calendars import Exclusion, calendars_of
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.firing_ids import firing_id
from parallel_scheduler.jobs import display_instant
from parallel_scheduler.queues import QueueRouter, payload_queue
from parallel_scheduler.recurring.overlap import recent_ids, running_jobs
from parallel_scheduler.recurring.overlap_policy import check_overlap
from parallel_scheduler.recurring.triggers import Schedule, firing_due_at, next_tick
from storage_adapters import CalendarRecord, NewJob, RecurringRecord, Storage

__all__ = ["BACKFILL_LIMIT", "Backfill", "backfill"]

#: The most ticks one backfill fires; a longer range is refused (backfill it in parts).
BACKFILL_LIMIT = 10_000
#: Ticks written per storage call.
_CHUNK = 1_000
#: Seconds between two looks at whether a ``buffer_one`` backfill's last firing has finished.
WAIT_POLL = 1.0


@dataclass(frozen=True)
class Backfill:
    """What a backfill did: the ticks of the range, how many jobs it created, how many were
    there already (fired by a scheduler or an earlier backfill), and, with an ``overlap`` other
    than ``allow``, how many ticks it did not fire."""

    ticks: int
    created: int
    existing: int
    skipped: int = 0
    overlap: str = "allow"
    #: Ticks of the range on dates the job's calendars exclude (not fired); ``None`` when the
    #: job names no calendar.
    excluded: int | None = None

    def to_dict(self) -> dict[str, int]:
        done = {"ticks": self.ticks, "created": self.created, "existing": self.existing}
        if self.excluded is not None:
            done["excluded"] = self.excluded
        return done if self.overlap == "allow" else {**done, "skipped": self.skipped}

    def summary(self) -> str:
        """What happened in words, for the command line and the dashboard."""
        said = f"{self.ticks} tick(s), {self.created} fired, {self.existing} already there"
        if self.excluded is not None:
            said += f", {self.excluded} on excluded dates"
        if self.overlap != "allow":
            said += f", {self.skipped} skipped (overlap {self.overlap})"
        return said


def backfill(
    storage: Storage,
    call: Callable[[Callable[[], list[bool]]], list[bool]],
    record: RecurringRecord,
    start: datetime,
    end: datetime,
    now: float,
    route: QueueRouter | None = None,
    overlap: str = "allow",
    clock: Callable[[], float] | None = None,
    calendars: Callable[[], Iterable[CalendarRecord]] | None = None,
) -> Backfill:
    """Fire every tick of ``record`` from ``start`` to ``end`` (both included, both aware and
    not after ``now``, the storage clock); ``InvalidJobError`` names what is wrong, and then
    nothing is written. ``route``: the queue of a call whose options name none (``queues.py``).
    ``overlap``: see the module; ``clock`` (default storage's) times a ``buffer_one`` wait;
    ``calendars``: reads the store's calendars, when the job names some: a tick on a date they
    exclude is not fired."""
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
    check_overlap(overlap, schedule.overlap_timeout)
    every_tick = _ticks(schedule, low, high)
    exclusion = (
        Exclusion.of(schedule.exclude, calendars_of(calendars()))
        if schedule.exclude and calendars
        else None
    )
    ticks = [tick for tick in every_tick if exclusion is None or not exclusion.excludes(tick)]
    done = partial(
        Backfill,
        len(every_tick),
        overlap=overlap,
        excluded=len(every_tick) - len(ticks) if schedule.exclude else None,
    )
    queue = payload_queue(record.task, record.payload, route)
    jobs = [
        NewJob(firing_id(record.id, tick), record.task, record.payload,
               firing_due_at(record.id, schedule, tick), queue=queue)
        for tick in ticks
    ]  # fmt: skip
    if overlap == "skip":
        if not jobs or running_jobs(
            storage, recent_ids(record.history, now, schedule.overlap_timeout)
        ):
            return done(0, 0, len(ticks))
        created = sum(call(partial(storage.add_jobs, jobs[-1:])))
        return done(created, 1 - created, len(ticks) - 1)
    if overlap == "buffer_one":
        clock = clock or storage.now
        created = _one_after_another(storage, call, record, jobs, schedule.overlap_timeout, clock)
        return done(created, len(ticks) - created, 0)
    created = sum(
        sum(call(partial(storage.add_jobs, jobs[first : first + _CHUNK])))
        for first in range(0, len(jobs), _CHUNK)
    )
    return done(created, len(ticks) - created)


def _one_after_another(
    storage: Storage,
    call: Callable[[Callable[[], list[bool]]], list[bool]],
    record: RecurringRecord,
    jobs: Sequence[NewJob],
    timeout: float,
    clock: Callable[[], float],
) -> int:
    """Fire ``jobs`` one at a time, each once nothing before it runs; returns how many were
    created. The kept firings count while younger than ``timeout`` (from their tick), each
    backfilled one until ``timeout`` after it was fired."""
    created = 0
    waiting_for: list[str] = []
    fired_at = clock()
    for job in jobs:
        while True:
            now = clock()
            ids = waiting_for if waiting_for else recent_ids(record.history, now, timeout)
            if waiting_for and now - fired_at >= timeout:
                break
            if not running_jobs(storage, ids):
                break
            time.sleep(WAIT_POLL)
        created += sum(call(partial(storage.add_jobs, [job])))
        waiting_for, fired_at = [job.id], clock()
    return created


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
