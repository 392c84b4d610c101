"""What every fault test needs: scheduler processes it can signal (``devtools.scheduler_process``
with the suite's settings), and the count of every job.

Counting is the point of the suite. Each test ends with a ``Tally``: jobs stored, jobs released
(marked Enqueued in storage), jobs dispatched (seen by the recording dispatcher, a broker queue or
a worker), lost (stored but never dispatched) and duplicated (dispatches beyond the first, summed
over ids). ``Tally.report`` prints one line per scenario, and with
``PARALLEL_SCHEDULER_FAULT_REPORT=/path/file.jsonl`` also appends it there as JSON.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from devtools import scheduler_process
from parallel_scheduler.engine.retrying import call_storage
from storage_adapters import JobState, NewJob, Storage

REPORT_ENV = "PARALLEL_SCHEDULER_FAULT_REPORT"
#: The suite's settings for a ``SchedulerProcess`` (one ``DelayedJobScheduler`` per prefix) and
#: a ``ServiceProcess``, where a test names none (the process takes the product's defaults for
#: what it is not given).
SCHEDULER_SETTINGS: dict[str, Any] = {
    "release_mode": "per_job", "batch_size": 500, "parallelism": 4, "poll_interval": 0.1,
    "lock_lease": 3.0,
}  # fmt: skip
SERVICE_SETTINGS: dict[str, Any] = {
    "release_mode": "batch", "batch_size": 500, "parallelism": 4, "poll_interval": 0.05,
    "lock_lease": 2.0, "heartbeat_interval": 0.25,
    "retention": "none",  # nothing here is old enough to purge; spare the purge passes
}  # fmt: skip


class SchedulerProcess(scheduler_process.SchedulerProcess):
    """One ``DelayedJobScheduler`` per prefix in a process of its own, with its own record and
    ready files; the suite's settings (``SCHEDULER_SETTINGS``) unless given. Its lock owner is
    ``<name>:<pid>:<prefix>``."""

    defaults = SCHEDULER_SETTINGS


def add_jobs(
    storage: Storage, ids: Sequence[str], due_at: float | Sequence[float], payload: str = "{}"
) -> None:
    """Store jobs in pages of 5,000 (one statement or script each)."""
    dues = [due_at] * len(ids) if isinstance(due_at, (int, float)) else list(due_at)
    for first in range(0, len(ids), 5000):
        page = range(first, min(len(ids), first + 5000))
        storage.add_jobs([NewJob(ids[i], "faults.record", payload, dues[i]) for i in page])


def counts(storage: Storage) -> dict[JobState, int]:
    """Counts per state; across a server restart, retried as the scheduler itself retries."""
    return call_storage(storage.count_by_state)


def enqueued(storage: Storage) -> int:
    return counts(storage)[JobState.ENQUEUED]


@dataclass
class Tally:
    """Every job, counted through the end of a scenario."""

    scenario: str
    stored: int
    released: int  # marked Enqueued in storage
    dispatched: int  # distinct ids that reached the dispatcher / broker / worker
    lost: int
    duplicated: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def count(
        cls,
        scenario: str,
        expected: Iterable[str],
        seen: Iterable[str],
        storage: Storage | Sequence[Storage],
        *,
        still_scheduled: Iterable[str] = (),
        **extra: Any,
    ) -> Tally:
        """``storage``: where the jobs are stored (several, when a test uses several prefixes).
        ``still_scheduled``: ids left Scheduled on purpose (a stop), so not lost but waiting."""
        storages = [storage] if isinstance(storage, Storage) else list(storage)
        expected_ids = set(expected)
        seen_counts = Counter(seen)
        waiting = set(still_scheduled)
        unexpected = set(seen_counts) - expected_ids
        assert not unexpected, f"dispatched ids that were never stored: {sorted(unexpected)[:5]}"
        both = waiting & set(seen_counts)
        assert not both, f"ids sent and still Scheduled: {sorted(both)[:5]}"
        return cls(
            scenario=scenario,
            stored=len(expected_ids),
            released=sum(enqueued(s) for s in storages),
            dispatched=len(seen_counts),
            lost=len(expected_ids - set(seen_counts) - waiting),
            duplicated=sum(n - 1 for n in seen_counts.values()),
            extra=extra,
        )

    def report(self) -> None:
        figures = ", ".join(f"{k}={v}" for k, v in self.extra.items())
        print(
            f"\nfault report: {self.scenario}: stored={self.stored} released={self.released} "
            f"dispatched={self.dispatched} lost={self.lost} duplicated={self.duplicated}"
            + (f" ({figures})" if figures else "")
        )
        target = os.environ.get(REPORT_ENV)
        if target:
            with open(target, "a") as out:
                out.write(json.dumps({**asdict(self), "at": time.time()}) + "\n")


class ServiceProcess(scheduler_process.SchedulerProcess):
    """A ``SchedulerService`` over a sharded store in a process of its own, with its own record
    and ready files; the suite's settings (``SERVICE_SETTINGS``) unless given. Its instance id
    and lock owner is ``<name>:<pid>``."""

    defaults = SERVICE_SETTINGS

    def __init__(
        self, workdir: Path, name: str, storage_url: str, prefix: str, shards: int, **settings: Any
    ) -> None:
        settings["shards"] = shards
        super().__init__(workdir, name, storage_url, [prefix], service=True, **settings)


def longest_gaps(
    first_dispatch: dict[str, float], due: dict[str, float], shard_of_id: dict[str, int]
) -> dict[int, float]:
    """Per shard, the longest wait of a job from its due time to its first dispatch: how long
    the shard went unserved at worst. Every id of ``due`` must be in ``first_dispatch``."""
    gaps: dict[int, float] = {}
    for job_id, due_at in due.items():
        shard = shard_of_id[job_id]
        gaps[shard] = max(gaps.get(shard, 0.0), first_dispatch[job_id] - due_at)
    return gaps
