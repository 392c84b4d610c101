"""One cell of the sweep: a batch size and a parallelism, timed over verified repetitions.

What is timed is exactly what a scheduler process does when a batch falls due: one
``DelayedJobScheduler.run_once()`` pass over ``batch_size`` due jobs, from storage to the
dispatcher. A pass takes the scheduler lock, syncs the storage clock, recovers expired claims,
fetches and releases the batch, makes one more (empty) fetch that ends the pass, and frees the
lock; all of that is in the figure, as it is in production.

Each cell gets its own storage prefix (fresh tables or keys) and its own scheduler, so the
thread pool and connection pool have the cell's parallelism; warm-up passes open those
connections and are verified but not kept. Jobs are added, and results checked, over a direct
connection, so neither the latency proxy nor the checks slow the setup or show up in a figure.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import storage_adapters
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.engine.stats import PassStats
from parallel_scheduler.profiling.verify import Observation, verify
from parallel_scheduler.profiling.workload import (
    BrokerQueue,
    CountingDispatcher,
    RecordingDispatcher,
    make_jobs,
)
from parallel_scheduler.settings import ReleaseMode, Settings
from storage_adapters import JobQuery, JobState, Storage, walk_jobs

__all__ = ["PREFIX_STEM", "CellResult", "Target", "run_cell"]

logger = logging.getLogger(__name__)
#: Every cell's storage prefix is ``prof_<run id>_<batch size>_<parallelism>``.
PREFIX_STEM = "prof_"
ADD_CHUNK = 1000


@dataclass(frozen=True)
class Target:
    """Where a sweep runs: storage (direct, and as the scheduler reaches it), broker, seed."""

    run_id: str
    direct_url: str
    scheduler_url: str
    release_mode: ReleaseMode
    seed: int
    broker: BrokerQueue | None = None


@dataclass
class CellResult:
    """Seconds per pass of the kept repetitions (warm-ups apart), or why the cell was skipped."""

    batch_size: int
    parallelism: int
    seconds: list[float] = field(default_factory=list)
    warmup_seconds: list[float] = field(default_factory=list)
    passes: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None


@contextmanager
def _cell_storages(
    target: Target, prefix: str, parallelism: int
) -> Iterator[tuple[Storage, Storage]]:
    """(control, scheduler's) storages under ``prefix``; everything under it is dropped after."""
    control = storage_adapters.from_url(target.direct_url, prefix=prefix, pool_size=2)
    try:
        control.setup()
        scheduled = storage_adapters.from_url(
            target.scheduler_url, prefix=prefix, pool_size=parallelism
        )
        try:
            yield control, scheduled
        finally:
            scheduled.close()
    finally:
        try:
            control.drop()
        except Exception as exc:  # never hide the error that got us here
            logger.warning("could not remove profile prefix %s: %s", prefix, exc)
        finally:
            control.close()


def _enqueued_ids(control: Storage, total: int) -> frozenset[str]:
    enqueued = walk_jobs(control, JobQuery(state=JobState.ENQUEUED))
    return frozenset(record.id for record in itertools.islice(enqueued, total))


def _label(repetition: int, warmup: int) -> str:
    if repetition < 0:
        return f"warm-up {repetition + warmup + 1}"
    return f"repetition {repetition + 1}"


@dataclass
class _Cell:
    """What the passes of one cell share."""

    target: Target
    control: Storage
    scheduler: DelayedJobScheduler
    dispatcher: CountingDispatcher | RecordingDispatcher
    batch_size: int
    parallelism: int
    all_ids: set[str] = field(default_factory=set)

    def timed_pass(self, repetition: int, where: str) -> tuple[float, PassStats]:
        """Add a fresh batch of due jobs, time one pass over it, verify what it did."""
        target, control = self.target, self.control
        queue = None if target.broker is None else target.broker.name
        due_at = control.now() - 1.0
        jobs = make_jobs(target.seed, self.batch_size, self.parallelism, repetition, due_at, queue)
        for first in range(0, len(jobs), ADD_CHUNK):
            control.add_jobs(jobs[first : first + ADD_CHUNK])
        expected = frozenset(job.id for job in jobs)
        self.all_ids.update(expected)
        self.dispatcher.take()
        started = time.perf_counter()
        stats: PassStats = self.scheduler.run_once()
        seconds = time.perf_counter() - started
        seen = Observation(
            expected=expected,
            stats=stats,
            handed_over=self.dispatcher.take(),
            counts=control.count_by_state(),
            stored_ids=_enqueued_ids(control, len(self.all_ids)),
            all_ids=frozenset(self.all_ids),
            broker_messages=None if target.broker is None else target.broker.drain(len(expected)),
        )
        verify(seen, where)
        return seconds, stats


def run_cell(
    target: Target,
    batch_size: int,
    parallelism: int,
    repetitions: int,
    warmup: int,
    on_pass: Callable[[str], None] = lambda _: None,
) -> CellResult:
    """Time ``warmup + repetitions`` verified passes of one cell; raises on a failed check."""
    result = CellResult(batch_size, parallelism)
    prefix = f"{PREFIX_STEM}{target.run_id}_{batch_size}_{parallelism}"
    dispatcher: CountingDispatcher | RecordingDispatcher = (
        CountingDispatcher() if target.broker is None else target.broker.dispatcher()
    )
    settings = Settings(
        prefix=prefix,
        max_degree_of_parallelism=parallelism,
        batch_size=batch_size,
        release_mode=target.release_mode,
    )
    with _cell_storages(target, prefix, parallelism) as (control, scheduled):
        scheduler = DelayedJobScheduler(
            scheduled, dispatcher, settings, owner=f"profile-{target.run_id}"
        )
        cell = _Cell(target, control, scheduler, dispatcher, batch_size, parallelism)
        try:
            for repetition in range(-warmup, repetitions):
                where = f"batch size {batch_size} x parallelism {parallelism}, "
                where += _label(repetition, warmup)
                on_pass(where)
                seconds, stats = cell.timed_pass(repetition, where)
                if repetition < 0:
                    result.warmup_seconds.append(seconds)
                else:
                    result.seconds.append(seconds)
                    result.passes.append(stats.as_dict())
        finally:
            scheduler.close()
    return result
