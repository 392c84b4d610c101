"""The release paths: how one batch of due jobs is claimed and handed to the sending, chosen once
when a delayed scheduler is built (``choose_path``).

* ``claim_per_job.py``: Hangfire's shape, each pool thread claims ONE job (its own lock), sends
  it and marks it (``release_mode="per_job"``);
* ``claim_batch.py``: the batch is claimed in one storage call, sent and marked a ``CHUNK`` per
  pool thread (``release_mode="batch"``, the default);
* ``claim_one_script.py``: storage and a Redis-list broker on one Redis server, the whole batch
  moved from the due set to the broker lists by one Lua script (batch mode, accept-time
  messages);
* ``claim_in_transaction.py``: PostgreSQL, each pool thread claims, sends and settles a
  ``TRANSACTION_CHUNK`` in one transaction (batch mode).

What a crash or a stall can send twice is what was sent and not yet settled: one job per pool
thread on the per-job path, one chunk per pool thread on the batch and transaction paths
(``chunk_for``), none on the one-script path, which pushes and marks atomically.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from parallel_scheduler.delayed.sending import Releaser
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.stats import Outcome
from storage_adapters import Storage, TransactionalReleaseStorage

__all__ = [
    "CHUNK",
    "TRANSACTION_CHUNK",
    "BatchRelease",
    "PathParts",
    "ReleasePath",
    "chunk_for",
]

#: Batch mode sends and then marks this many jobs at a time, per pool thread. It bounds what a
#: crash or a stall can send twice (one chunk per thread); smaller chunks would cost more in
#: per-chunk round trips (a mark, and with ``fast_publish`` a broker push) than they gain.
CHUNK = 50
#: On storage that releases a chunk in one transaction (PostgreSQL) a chunk is larger: each one
#: costs a transaction and a broker push, which at 50 jobs were most of the release's time (the
#: figures are in the docs' performance page). It is also what a crash can send twice per pool
#: thread: ``min(batch_size, max_degree_of_parallelism * 250)``, one default batch.
TRANSACTION_CHUNK = 250


def chunk_for(storage: Storage) -> int:
    """Jobs a pool thread sends before it settles them, in ``batch`` mode on ``storage``."""
    return TRANSACTION_CHUNK if isinstance(storage, TransactionalReleaseStorage) else CHUNK


@dataclass(frozen=True)
class PathParts:
    """What every release path works with: the store, the sending it hands claims to, the pool
    its threads come from, the batch size, the claims' lease and the metrics label of the
    dispatcher's path (``dispatchers.metrics_label``)."""

    storage: Storage
    releaser: Releaser
    pool: BoundedPool
    batch_size: int
    claim_lease: float
    label: str


@dataclass
class BatchRelease:
    """What releasing one batch did: the jobs fetched, every outcome, and the outcomes again by
    the metrics label of the path each job went by."""

    fetched: int
    outcomes: Counter[Outcome]
    by_label: dict[str, Counter[Outcome]] = field(default_factory=dict)


class ReleasePath(Protocol):
    """One way to claim and send a batch of the earliest-due jobs."""

    @property
    def releases_by_script(self) -> bool:
        """True when batches leave by the one-script release."""

    def release_batch(self, held: HeldLock) -> BatchRelease:
        """Claim up to one batch of due jobs under ``held`` and send them."""
