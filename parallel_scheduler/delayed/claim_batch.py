"""The batch path (``release_mode="batch"``): the batch claimed in one storage call, then sent
and marked Enqueued a ``CHUNK`` per pool thread."""

from __future__ import annotations

import time
from collections import Counter

from parallel_scheduler.delayed.paths import CHUNK, BatchRelease, PathParts
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome
from storage_adapters import ClaimedJob

__all__ = ["BatchClaims", "send_in_chunks"]


def send_in_chunks(
    parts: PathParts, claims: list[ClaimedJob], held: HeldLock, claimed_at: float
) -> Counter[Outcome]:
    """Send and mark ``claims`` a ``CHUNK`` per pool thread. ``claimed_at``: the monotonic time
    taken before the claim request (see ``Releaser.release_claims``)."""
    chunks = [claims[i : i + CHUNK] for i in range(0, len(claims), CHUNK)]
    release = parts.releaser.release_claims
    counters = parts.pool.map(lambda chunk: release(chunk, held, claimed_at), chunks)
    return sum(counters, Counter[Outcome]())


class BatchClaims:
    releases_by_script = False

    def __init__(self, parts: PathParts) -> None:
        self._parts = parts

    def release_batch(self, held: HeldLock) -> BatchRelease:
        parts = self._parts
        claimed_at = time.monotonic()  # before the claim request: see Releaser.release_claims
        claims = call_storage(
            lambda: parts.storage.claim_due(parts.batch_size, held.lease, parts.claim_lease)
        )
        outcomes = send_in_chunks(parts, claims, held, claimed_at)
        return BatchRelease(len(claims), outcomes, {parts.label: outcomes})
