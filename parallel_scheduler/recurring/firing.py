"""Firing a recurring job: where a tick becomes a job. Its ticks are planned (cron, time zone,
misfire policy) and their firing jobs added with the job's next run advanced, in one
compare-and-set on its version: a firing has a deterministic id (``firing_ids.py``), so a
repeated attempt at one tick is a no-op in storage and every tick fires exactly once, even
across crashes and racing schedulers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.recorder import MetricsRecorder
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import FireOutcome, FireResult
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import check_instant
from parallel_scheduler.recurring.history import add_history, later_run
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.triggers import Schedule, plan_firing
from storage_adapters import Firing, NewJob, RecurringRecord, Storage

__all__ = ["fire"]

logger = logging.getLogger(__name__)


def fire(
    storage: Storage,
    record: RecurringRecord,
    held: HeldLock,
    now: Callable[[], float],
    metrics: MetricsRecorder,
) -> FireResult:
    """Fire one recurring job under ``held``: plan its ticks up to ``now()`` (the storage clock),
    then add their firing jobs and advance its next run in one compare-and-set on its version.
    Returns its outcome and the firing jobs it accounts for."""
    if record.next_run_at is None or not held.valid():
        return FireResult(FireOutcome.STALE)
    try:
        schedule = Schedule.from_json(record.schedule)
        check_instant("next run", record.next_run_at)
        plan = plan_firing(schedule, record.next_run_at, now())
    except (InvalidJobError, ValueError, TypeError, OverflowError) as exc:
        # A row written by hand or before the checks: left as it is, reported, not fired.
        logger.error("recurring job %s is unusable: %s", record.id, exc)
        return FireResult(FireOutcome.FAILED)
    jobs = tuple(
        NewJob(id=firing_id(record.id, tick), task=record.task, payload=record.payload, due_at=tick)
        for tick in plan.ticks
    )
    firing = Firing(
        next_run_at=plan.next_run_at,
        last_run_at=(
            later_run(record.last_run_at, plan.ticks[-1]) if plan.ticks else record.last_run_at
        ),
        history=add_history(record.history, [(job.due_at, job.id) for job in jobs]),
        jobs=jobs,
    )
    result = call_storage(
        lambda: storage.fire_recurring(record.id, record.version, held.lease, firing)
    )
    if result is None:
        return FireResult(FireOutcome.STALE)
    created = sum(result)
    metrics.fired(created)
    metrics.misfires(schedule.misfire_policy, plan.missed)
    return FireResult(FireOutcome.FIRED, created, len(result) - created, plan.missed)
