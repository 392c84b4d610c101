"""Firing recurring jobs: where a tick becomes a job. A chunk of due recurring jobs is planned
(cron, time zone, misfire policy: ``triggers.plan_firing``) and fired in ONE storage step
(``fire_recurring_many``: one script on Redis, one transaction on SQL), which, per recurring job,
adds its firing jobs and advances its next run with a compare-and-set on its version. A firing
has a deterministic id (``firing_ids.py``), so a repeated attempt at one tick is a no-op in
storage and every tick fires exactly once, even across crashes and racing schedulers.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.recorder import MetricsRecorder
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import FireOutcome, FireResult
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import check_instant
from parallel_scheduler.recurring.history import add_history, later_run
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.triggers import FiringPlan, Schedule, plan_firing
from storage_adapters import Firing, NewJob, PlannedFiring, RecurringRecord, Storage

__all__ = ["FIRE_CHUNK", "Envelope", "fire_chunk"]

logger = logging.getLogger(__name__)

#: Recurring jobs per storage step. A step writes each one's firing jobs and its row: 200 keeps
#: a Redis script's run (which blocks the server) and a transaction's row locks short, while the
#: per-step round trip is spread over 200 firings.
FIRE_CHUNK = 200

#: Builds a firing job's broker message as it is created (the accept-time message of the
#: delayed path), or ``None`` to build it at release.
Envelope = Callable[[NewJob], "str | None"]


def fire_chunk(
    storage: Storage,
    held: HeldLock,
    now: Callable[[], float],
    metrics: MetricsRecorder,
    envelope: Envelope | None,
    records: Sequence[RecurringRecord],
) -> list[FireResult]:
    """Fire ``records`` under ``held``: plan each one's ticks up to ``now()`` (the storage
    clock), then add their firing jobs and advance each one's next run in one storage step.
    Returns each record's outcome and the firing jobs it accounts for, in order."""
    results: list[FireResult | None] = [None] * len(records)
    planned: list[PlannedFiring] = []
    plans: list[tuple[int, Schedule, FiringPlan]] = []
    moment = now()
    for position, record in enumerate(records):
        if record.next_run_at is None:
            results[position] = FireResult(FireOutcome.STALE)
            continue
        try:
            schedule = Schedule.from_json(record.schedule)
            check_instant("next run", record.next_run_at)
            plan = plan_firing(schedule, record.next_run_at, moment)
        except (InvalidJobError, ValueError, TypeError, OverflowError) as exc:
            # A row written by hand or before the checks: left as it is, reported, not fired.
            logger.error("recurring job %s is unusable: %s", record.id, exc)
            results[position] = FireResult(FireOutcome.FAILED)
            continue
        planned.append(_planned(record, plan, envelope))
        plans.append((position, schedule, plan))
    if planned and held.valid():
        replies = call_storage(lambda: storage.fire_recurring_many(held.lease, planned))
    else:
        replies = [None] * len(planned)
    misfires: Counter[str] = Counter()
    for (position, schedule, plan), reply in zip(plans, replies, strict=True):
        if reply is None:
            results[position] = FireResult(FireOutcome.STALE)
            continue
        created = sum(reply)
        results[position] = FireResult(
            FireOutcome.FIRED, created, len(reply) - created, plan.missed
        )
        misfires[schedule.misfire_policy] += plan.missed
    metrics.fired(sum(result.created for result in results if result is not None))
    for policy, missed in misfires.items():
        metrics.misfires(policy, missed)
    return [result for result in results if result is not None]


def _planned(record: RecurringRecord, plan: FiringPlan, envelope: Envelope | None) -> PlannedFiring:
    """What firing ``record`` by ``plan`` writes, at the version the plan was made from."""
    jobs = tuple(
        NewJob(id=firing_id(record.id, tick), task=record.task, payload=record.payload, due_at=tick)
        for tick in plan.ticks
    )
    if envelope is not None:
        jobs = tuple(
            NewJob(
                id=job.id,
                task=job.task,
                payload=job.payload,
                due_at=job.due_at,
                envelope=envelope(job),
            )
            for job in jobs
        )
    firing = Firing(
        next_run_at=plan.next_run_at,
        last_run_at=(
            later_run(record.last_run_at, plan.ticks[-1]) if plan.ticks else record.last_run_at
        ),
        history=add_history(record.history, [(job.due_at, job.id) for job in jobs]),
        jobs=jobs,
    )
    return PlannedFiring(record.id, record.version, firing)
