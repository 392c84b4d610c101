"""The per-job path (``release_mode="per_job"``), Hangfire's shape: the batch's due ids in one
read, then each pool thread claims ONE job (the job's own lock), sends it and marks it."""

from __future__ import annotations

import time
from collections import Counter

from parallel_scheduler.delayed.paths import BatchRelease
from parallel_scheduler.delayed.sending import Releaser
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome
from storage_adapters import Storage

__all__ = ["PerJobClaims"]


class PerJobClaims:
    releases_by_script = False

    def __init__(
        self,
        storage: Storage,
        releaser: Releaser,
        pool: BoundedPool,
        batch_size: int,
        claim_lease: float,
    ) -> None:
        self._storage = storage
        self._releaser = releaser
        self._pool = pool
        self._batch_size = batch_size
        self._claim_lease = claim_lease

    def release_batch(self, held: HeldLock) -> BatchRelease:
        ids = call_storage(lambda: self._storage.fetch_due_ids(self._batch_size))
        outcomes = Counter(self._pool.map(lambda job_id: self._release_one(job_id, held), ids))
        return BatchRelease(len(ids), outcomes, {"per_job": outcomes})

    def _release_one(self, job_id: str, lock: HeldLock) -> Outcome:
        """Take the job's own lock (its claim), then hand it over."""
        if self._releaser.halted or not lock.valid():
            return Outcome.STOPPED
        claimed_at = time.monotonic()
        claim = call_storage(lambda: self._storage.claim(job_id, lock.lease, self._claim_lease))
        if claim is None:
            return Outcome.NOT_CLAIMED
        (outcome,) = self._releaser.release_claims([claim], lock, claimed_at).elements()
        return outcome
