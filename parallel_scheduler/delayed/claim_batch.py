"""The batch path (``release_mode="batch"``): the batch claimed in one storage call, then sent
and marked Enqueued a ``CHUNK`` per pool thread."""

from __future__ import annotations

import time
from collections import Counter

from parallel_scheduler.delayed.paths import CHUNK, BatchRelease
from parallel_scheduler.delayed.sending import Releaser
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome
from storage_adapters import ClaimedJob, Storage

__all__ = ["BatchClaims", "send_in_chunks"]


def send_in_chunks(
    releaser: Releaser,
    pool: BoundedPool,
    claims: list[ClaimedJob],
    held: HeldLock,
    claimed_at: float,
) -> Counter[Outcome]:
    """Send and mark ``claims`` a ``CHUNK`` per pool thread. ``claimed_at``: the monotonic time
    taken before the claim request (see ``Releaser.release_claims``)."""
    chunks = [claims[i : i + CHUNK] for i in range(0, len(claims), CHUNK)]
    counters = pool.map(lambda chunk: releaser.release_claims(chunk, held, claimed_at), chunks)
    return sum(counters, Counter[Outcome]())


class BatchClaims:
    releases_by_script = False

    def __init__(
        self,
        storage: Storage,
        releaser: Releaser,
        pool: BoundedPool,
        batch_size: int,
        claim_lease: float,
        label: str,
    ) -> None:
        """``label``: the metrics label of the dispatcher's path (``metrics_label``)."""
        self._storage = storage
        self._releaser = releaser
        self._pool = pool
        self._batch_size = batch_size
        self._claim_lease = claim_lease
        self._label = label

    def release_batch(self, held: HeldLock) -> BatchRelease:
        claimed_at = time.monotonic()  # before the claim request: see Releaser.release_claims
        claims = call_storage(
            lambda: self._storage.claim_due(self._batch_size, held.lease, self._claim_lease)
        )
        outcomes = send_in_chunks(self._releaser, self._pool, claims, held, claimed_at)
        return BatchRelease(len(claims), outcomes, {self._label: outcomes})
