"""Firing recurring jobs: where a tick becomes a job. A chunk of due recurring jobs is planned
(cron, time zone, misfire policy: ``misfires.plan_firing``) and fired in ONE storage step
(``fire_recurring_many``: one script on Redis, one transaction on SQL), which, per recurring job,
adds its firing jobs and advances its next run with a compare-and-set on its version. A firing
has a deterministic id (``firing_ids.py``), so a repeated attempt at one tick is a no-op in
storage and every tick fires exactly once, even across crashes and racing schedulers. A job's
``max_runs`` trims its plan to the runs left (``limits.py``); the count is in the history the
same step writes, under the same compare-and-set. A job's ``overlap`` policy holds its ticks back
while an earlier firing runs (``overlap.py``: read before the step, written by it); one that
reached its ``pause_after_failures`` is left out of the step and paused (``failure_pause.py``).

Where storage and the broker's lists share a Redis server (``FiringPush.firing_list_db``, found
by the delayed scheduler's one-script release), the same step pushes each new firing that is
due onto its broker list, Enqueued (``ListFiringStorage``): a tick reaches the broker without
waiting for a release pass.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from parallel_scheduler.calendars import Calendar
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.recorder import MetricsRecorder
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import FireOutcome, FireResult
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.queues import QueueRouter, payload_queue
from parallel_scheduler.ranges import check_instant
from parallel_scheduler.recurring.failure_pause import Pause, gate_outcomes, pause_all
from parallel_scheduler.recurring.history import add_history, later_run
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.limits import limit_plan
from parallel_scheduler.recurring.misfires import FiringPlan, plan_firing
from parallel_scheduler.recurring.overlap import Planned
from parallel_scheduler.recurring.triggers import Schedule, firing_due_at
from storage_adapters import (
    ChunkSend,
    ClaimedJob,
    Firing,
    ListFiringStorage,
    NewJob,
    PlannedFiring,
    RecurringRecord,
    Storage,
    TransactionalFiringStorage,
)

__all__ = [
    "FIRE_CHUNK", "Envelope", "FiringPush", "PlannedChunk", "finish_chunk", "fire_chunk",
    "plan_chunk",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: Recurring jobs per storage step. A step writes each one's firing jobs and its row: 200 keeps
#: a Redis script's run (which blocks the server) and a transaction's row locks short, while the
#: per-step round trip is spread over 200 firings.
FIRE_CHUNK = 200

#: Per planned recurring job, whether each of its firing jobs was new; ``None`` if its
#: compare-and-set failed (``fire_recurring_many``'s answer).
FiringReplies = list[list[bool] | None]

#: Builds a firing job's broker message as it is created (the accept-time message of the
#: delayed path), or ``None`` to build it at release.
Envelope = Callable[[NewJob], "str | None"]


class FiringPush(Protocol):
    """Where firings may go straight to the broker: the delayed scheduler of the same store,
    which knows whether storage and broker share a Redis server and counts what is released."""

    @property
    def firing_list_db(self) -> int | None:
        """The broker database to push due firings into, or ``None``: store them Scheduled."""

    def firings_pushed(self, jobs: Sequence[ClaimedJob]) -> None:
        """Count and announce ``jobs``, pushed onto the broker by the firing step, as released."""

    def send_firings(
        self, lock: HeldLock, jobs: int, work: Callable[[ChunkSend], FiringReplies]
    ) -> FiringReplies | None:
        """Run ``work``, a firing step that sends its due firings in its own transaction, with
        the delayed scheduler's sends; ``None`` when that cannot be (fire the plain way)."""


def fire_chunk(
    storage: Storage,
    held: HeldLock,
    now: Callable[[], float],
    metrics: MetricsRecorder,
    envelope: Envelope | None,
    records: Sequence[RecurringRecord],
    push: FiringPush | None = None,
    route: QueueRouter | None = None,
    calendars: Mapping[str, Calendar] | None = None,
    missing: set[str] | None = None,
) -> list[FireResult]:
    """Fire ``records`` under ``held``: plan each one's ticks up to ``now()`` (the storage
    clock), then add their firing jobs and advance each one's next run in one storage step.
    Returns each record's outcome and the firing jobs it accounts for, in order. Each firing
    carries its queue (``queues.payload_queue``, with ``route`` for a call that names none).
    ``calendars``: the pass's calendars of excluded dates, by name (``calendars.py``); the names
    a schedule excludes that are not among them go into ``missing``, for the pass to warn once."""
    chunk = plan_chunk(storage, now(), envelope, records, route, calendars, missing)
    return finish_chunk(storage, held, metrics, chunk, push)


@dataclass
class PlannedChunk:
    """A chunk of recurring jobs planned, not yet fired: what ``finish_chunk`` writes and how
    it accounts for each record (``results`` holds the outcomes decided while planning)."""

    results: list[FireResult | None]
    planned: list[PlannedFiring]
    plans: list[tuple[int, Schedule, FiringPlan, int]] = field(default_factory=list)
    pauses: list[tuple[int, Pause]] = field(default_factory=list)

    def firings(self) -> int:
        return sum(len(item.firing.jobs) for item in self.planned)


def plan_chunk(
    storage: Storage,
    moment: float,
    envelope: Envelope | None,
    records: Sequence[RecurringRecord],
    route: QueueRouter | None = None,
    calendars: Mapping[str, Calendar] | None = None,
    missing: set[str] | None = None,
) -> PlannedChunk:
    """``fire_chunk``'s planning, at storage time ``moment``: each record's ticks (misfire
    policy, calendars, overlap, max runs), firing jobs, messages and history, nothing written
    (only an overlap or failure policy reads outcomes)."""
    results: list[FireResult | None] = [None] * len(records)
    chunk = PlannedChunk(results, [])
    staged: list[Planned] = []
    positions: list[int] = []
    for position, record in enumerate(records):
        if record.next_run_at is None:
            results[position] = FireResult(FireOutcome.STALE)
            continue
        try:
            schedule = Schedule.from_json(record.schedule)
            check_instant("next run", record.next_run_at)
            plan = plan_firing(schedule, record.next_run_at, moment, calendars)
            if missing is not None and calendars is not None and schedule.exclude:
                missing.update(name for name in schedule.exclude if name not in calendars)
        except (InvalidJobError, ValueError, TypeError, OverflowError) as exc:
            # A row written by hand or before the checks: left as it is, reported, not fired.
            logger.error("recurring job %s is unusable: %s", record.id, exc)
            results[position] = FireResult(FireOutcome.FAILED)
            continue
        staged.append((record, schedule, plan))
        positions.append(position)
    gated = gate_outcomes(storage, staged, moment, calendars)  # reads only if a job needs
    for position, (record, schedule, _), gate in zip(positions, staged, gated, strict=True):
        if isinstance(gate, Pause):  # its failures reached pause_after_failures: not fired,
            chunk.pauses.append((position, gate))  # but paused once the step is planned
            continue
        plan, held_back = gate
        # the count read at the version the firing is planned from: the compare-and-set
        # that guards the firing guards the count, so racing schedulers cannot exceed it
        plan = limit_plan(plan, schedule.max_runs, record.history)
        chunk.planned.append(_planned(record, schedule, plan, envelope, route))
        chunk.plans.append((position, schedule, plan, held_back))
    return chunk


def finish_chunk(
    storage: Storage,
    held: HeldLock,
    metrics: MetricsRecorder,
    chunk: PlannedChunk,
    push: FiringPush | None = None,
) -> list[FireResult]:
    """Fire a planned chunk under ``held`` in one storage step (``_fire``), pause the jobs its
    planning found failing, count it all; each record's outcome, in order."""
    results = chunk.results
    replies = _fire(storage, held, chunk.planned, push)
    paused = pause_all(storage, held, [pause for _, pause in chunk.pauses])
    for (position, _), done in zip(chunk.pauses, paused, strict=True):
        results[position] = FireResult(FireOutcome.PAUSED if done else FireOutcome.STALE)
    metrics.paused_after_failures(sum(paused))
    misfires: Counter[str] = Counter()
    overlapped_by: Counter[str] = Counter()
    for (position, schedule, plan, held_back), reply in zip(chunk.plans, replies, strict=True):
        if reply is None:
            results[position] = FireResult(FireOutcome.STALE)
            continue
        created = sum(reply)
        results[position] = FireResult(
            FireOutcome.FIRED, created, len(reply) - created, plan.missed, held_back
        )
        misfires[schedule.misfire_policy] += plan.missed
        overlapped_by[schedule.overlap] += held_back
    metrics.fired(sum(result.created for result in results if result is not None))
    for policy, missed in misfires.items():
        metrics.misfires(policy, missed)
    for policy, count in overlapped_by.items():
        metrics.overlap_held(policy, count)
    return [result for result in results if result is not None]


def _fire(
    storage: Storage, held: HeldLock, planned: list[PlannedFiring], push: FiringPush | None
) -> FiringReplies:
    """The storage step: where ``push`` allows, the due firings straight to the broker (sent
    in the step's transaction on PostgreSQL, pushed onto the lists by the step's script on
    Redis), else stored for the delayed scheduler to release."""
    if not planned or not held.valid():
        return [None] * len(planned)
    if push is not None and isinstance(storage, TransactionalFiringStorage):
        jobs = sum(len(item.firing.jobs) for item in planned)
        sent = push.send_firings(
            held,
            jobs,
            lambda send: storage.fire_and_send_in_transaction(held.lease, planned, send),
        )
        if sent is not None:
            return sent
        if not held.valid():
            return [None] * len(planned)
    list_db = None if push is None else push.firing_list_db
    if list_db is None or push is None or not isinstance(storage, ListFiringStorage):
        return call_storage(lambda: storage.fire_recurring_many(held.lease, planned))
    replies, pushed = call_storage(
        lambda: storage.fire_recurring_to_lists(held.lease, planned, list_db)
    )
    if pushed:
        push.firings_pushed(pushed)
    return replies


def _planned(
    record: RecurringRecord,
    schedule: Schedule,
    plan: FiringPlan,
    envelope: Envelope | None,
    route: QueueRouter | None,
) -> PlannedFiring:
    """What firing ``record`` by ``plan`` writes, at the version the plan was made from; each
    firing job due at its tick, moved by the schedule's jitter (stored Scheduled when that is
    still ahead, then released as any delayed job), sent to its payload's queue."""
    queue = payload_queue(record.task, record.payload, route) if plan.ticks else None
    jobs = tuple(
        NewJob(
            id=firing_id(record.id, tick),
            task=record.task,
            payload=record.payload,
            due_at=firing_due_at(record.id, schedule, tick),
            queue=queue,
        )
        for tick in plan.ticks
    )
    if envelope is not None:  # each job built again with its message (NewJob is frozen)
        jobs = tuple(
            NewJob(job.id, job.task, job.payload, job.due_at, envelope(job), job.queue)
            for job in jobs
        )
    firing = Firing(
        next_run_at=plan.next_run_at,
        last_run_at=(
            later_run(record.last_run_at, plan.ticks[-1]) if plan.ticks else record.last_run_at
        ),
        history=add_history(
            record.history, [(tick, job.id) for tick, job in zip(plan.ticks, jobs, strict=True)]
        ),
        jobs=jobs,
    )
    return PlannedFiring(record.id, record.version, firing)
