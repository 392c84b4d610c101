"""Overlap: what a due recurring job fires while an earlier firing of it has not finished
(``Schedule.overlap``; the values are checked in ``overlap_policy.py``).

A firing is **running** when it is one of the job's kept firings (its history: scheduled ticks
and triggers) younger than ``overlap_timeout`` (counted from its tick, a trigger's from its
instant) whose latest execution outcome is not final (succeeded, failed, revoked: a retried run
runs again) and whose job is still there and was not cancelled, expired or set aside. So a
firing whose worker died, or whose outcome is never recorded, counts as finished once the
timeout has passed.

- ``skip``: a tick that comes while a firing runs is not fired; the next run moves past it.
- ``buffer_one``: such a tick is held: the next run becomes a re-check instant (``RECHECK``
  seconds on, or the next tick if sooner), written by the same compare-and-set step as a
  firing, so the job is looked at again without busy-looping or counting as overdue. The first
  pass that finds nothing running fires ONE firing for the newest tick that has come by then
  (the held ticks collapse into it), with that tick's deterministic id.
- Both fire at most one tick per pass (the latest of a catch-up): more would overlap each other.

The outcomes are read before the storage step that fires (one ``latest_outcomes`` per chunk,
``read_latest``, shared with ``failure_pause.py``'s count of failures, then a ``get_job`` per
firing with no final outcome). An outcome only ever goes from unfinished
to finished, so a race with a worker finishing delays a tick by one pass, never fires two at
once; the step's compare-and-set still makes each tick fire once across racing schedulers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import partial

from parallel_scheduler.calendars import Calendar, Exclusion
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.ranges import in_range
from parallel_scheduler.recurring.history import last_scheduled_tick, read_history
from parallel_scheduler.recurring.misfires import FiringPlan
from parallel_scheduler.recurring.triggers import Schedule, next_tick, ticks_back
from storage_adapters import JobState, OutcomeEvent, OutcomeState, RecurringRecord, Storage

#: A due recurring job as ``fire_chunk`` plans it: its row, its schedule, its misfire plan.
Planned = tuple[RecurringRecord, Schedule, FiringPlan]

__all__ = [
    "RECHECK",
    "Planned",
    "apply_overlap",
    "overlap_ids",
    "read_latest",
    "recent_ids",
    "running_jobs",
]

#: Seconds between two looks at a job holding a buffered tick: its firing comes at most this
#: long (plus a poll interval) after the running one finishes; each look is one small write.
RECHECK = 5.0
#: Final outcomes: the run ended (``retried`` is not: the task runs again under its id).
FINISHED = frozenset({OutcomeState.SUCCEEDED, OutcomeState.FAILED, OutcomeState.REVOKED})
#: Job states in which a firing never runs (``failed``: set aside, it could not be sent).
NOT_RUNNING = frozenset({JobState.CANCELLED, JobState.EXPIRED, JobState.FAILED})
_IDS_PER_READ = 1000  # storage's limit for one latest_outcomes call


def _needs_check(schedule: Schedule, due: float | None, plan: FiringPlan) -> bool:
    """Whether firing this plan depends on running firings: a policy other than ``allow`` and
    a tick to fire, or a buffered tick held (``buffer_one`` with a next run that is no tick)."""
    if schedule.overlap == "allow":
        return False
    return bool(plan.ticks) or (due is not None and _waiting(schedule, due))


def recent_ids(history: str, now: float, timeout: float) -> list[str]:
    """The job ids of the kept firings younger than ``timeout`` seconds at ``now``."""
    ids: list[str] = []
    for entry in read_history(history, []):
        tick, job_id = entry.get("tick"), entry.get("job_id")
        if not isinstance(job_id, str) or not isinstance(tick, (int, float)):
            continue
        if in_range(tick) and now - float(tick) < timeout:
            ids.append(job_id)
    return ids


def read_latest(storage: Storage, job_ids: Iterable[str]) -> dict[str, OutcomeEvent]:
    """The latest execution outcome of each of ``job_ids`` that has one: one
    ``latest_outcomes`` read per thousand ids, shared by every check of a chunk that needs
    outcomes (overlap here, ``pause_after_failures`` in ``failure_pause.py``)."""
    ids = list(dict.fromkeys(job_ids))
    latest: dict[str, OutcomeEvent] = {}
    for first in range(0, len(ids), _IDS_PER_READ):
        part = ids[first : first + _IDS_PER_READ]
        latest.update(call_storage(partial(storage.latest_outcomes, part)))
    return latest


def running_jobs(
    storage: Storage,
    job_ids: Iterable[str],
    latest: Mapping[str, OutcomeEvent] | None = None,
) -> set[str]:
    """Those of ``job_ids`` still running (the module's rule): their outcomes read (or taken
    from ``latest``, read already for all of them), then one ``get_job`` per id without a final
    outcome."""
    ids = list(dict.fromkeys(job_ids))
    if latest is None:
        latest = read_latest(storage, ids)
    running: set[str] = set()
    for job_id in ids:
        event = latest.get(job_id)
        if event is not None and event.state in FINISHED:
            continue
        job = call_storage(partial(storage.get_job, job_id))
        if job is not None and job.state not in NOT_RUNNING:
            running.add(job_id)
    return running


def overlap_ids(items: Sequence[Planned], now: float) -> dict[int, list[str]]:
    """By position, the kept firings to look at of each item whose policy needs them."""
    return {
        i: recent_ids(record.history, now, schedule.overlap_timeout)
        for i, (record, schedule, plan) in enumerate(items)
        if _needs_check(schedule, record.next_run_at, plan)
    }


def apply_overlap(
    storage: Storage,
    items: Sequence[Planned],
    now: float,
    calendars: Mapping[str, Calendar] | None,
    latest: Mapping[str, OutcomeEvent] | None = None,
) -> list[tuple[FiringPlan, int]]:
    """Each item's plan as its overlap policy has it at storage time ``now``, and how many of
    its ticks the policy held back (skipped, or collapsed into one firing): one read of the
    running firings for all the items whose policy needs it (none when ``latest`` holds the
    outcomes already read for them), none when no item's does."""
    recent = overlap_ids(items, now)
    decided: list[tuple[FiringPlan, int]] = [(plan, 0) for _, _, plan in items]
    if not recent:
        return decided
    ids = (job_id for found in recent.values() for job_id in found)
    running = running_jobs(storage, ids, latest)
    for i, found in recent.items():
        busy = any(job_id in running for job_id in found)
        decided[i] = _decided(items[i], busy, now, calendars)
    return decided


def _decided(
    item: Planned, busy: bool, now: float, calendars: Mapping[str, Calendar] | None
) -> tuple[FiringPlan, int]:
    """One job's plan under its policy, given whether one of its firings runs."""
    record, schedule, plan = item
    if busy:
        if schedule.overlap == "skip":
            return FiringPlan([], plan.next_run_at, plan.missed), len(plan.ticks)
        recheck = now + RECHECK
        if plan.next_run_at is not None:
            recheck = min(recheck, plan.next_run_at)
        return FiringPlan([], recheck, plan.missed), len(plan.ticks)
    ticks = plan.ticks[-1:]
    if record.next_run_at is not None and _waiting(schedule, record.next_run_at):
        held = _buffered_tick(record, schedule, now, calendars)
        ticks = [] if held is None else [held]
    held_back = sum(1 for tick in plan.ticks if tick not in ticks)
    return FiringPlan(ticks, plan.next_run_at, plan.missed), held_back


def _waiting(schedule: Schedule, due: float) -> bool:
    """Whether a ``buffer_one`` job holds a buffered tick: its next run is a re-check instant,
    not a tick (every other writer stores a tick, or no next run)."""
    if schedule.overlap != "buffer_one":
        return False
    return next_tick(schedule, math.nextafter(due, -math.inf)) != due


def _buffered_tick(
    record: RecurringRecord,
    schedule: Schedule,
    now: float,
    calendars: Mapping[str, Calendar] | None,
) -> float | None:
    """The newest tick that has come (not excluded, not past the end date, inside the catch-up
    window) after the job's latest scheduled firing: what a buffered wait fires once."""
    last = last_scheduled_tick(read_history(record.history, []))
    low = record.next_run_at or now
    low -= schedule.overlap_timeout + RECHECK  # a wait ends within a timeout of its tick
    if last is not None:
        low = max(low, math.nextafter(last, math.inf))
    if schedule.catch_up_window is not None:
        low = max(low, now - schedule.catch_up_window)
    until = now if schedule.end_at is None else min(now, schedule.end_at)
    exclusion = Exclusion.of(schedule.exclude, calendars) if calendars else None
    for tick in ticks_back(schedule, low, until):
        if exclusion is None or exclusion.span(tick) is None:
            return tick
    return None
