"""The per-job path (``release_mode="per_job"``), Hangfire's shape: the batch's due ids in one
read, then each pool thread claims ONE job (the job's own lock), sends it and marks it."""

from __future__ import annotations

import time
from collections import Counter

from parallel_scheduler.delayed.paths import BatchRelease, PathParts
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome

__all__ = ["PerJobClaims"]


class PerJobClaims:
    releases_by_script = False

    def __init__(self, parts: PathParts) -> None:
        self._parts = parts

    def release_batch(self, held: HeldLock) -> BatchRelease:
        parts = self._parts
        ids = call_storage(lambda: parts.storage.fetch_due_ids(parts.batch_size))
        outcomes = Counter(parts.pool.map(lambda job_id: self._release_one(job_id, held), ids))
        return BatchRelease(len(ids), outcomes, {parts.label: outcomes})

    def _release_one(self, job_id: str, lock: HeldLock) -> Outcome:
        """Take the job's own lock (its claim), then hand it over."""
        parts = self._parts
        if parts.releaser.halted or not lock.valid():
            return Outcome.STOPPED
        claimed_at = time.monotonic()
        claim = call_storage(lambda: parts.storage.claim(job_id, lock.lease, parts.claim_lease))
        if claim is None:
            return Outcome.NOT_CLAIMED
        (outcome,) = parts.releaser.release_claims([claim], lock, claimed_at).elements()
        return outcome
