"""PostgreSQL's path (batch mode on ``TransactionalReleaseStorage``): the batch's ids in one
read, then each pool thread claims a ``TRANSACTION_CHUNK`` of them (``FOR UPDATE SKIP LOCKED``:
the per-job locks), sends it and settles it in ONE transaction, so each job's row is written
once and no mark statement is needed."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from parallel_scheduler.delayed.paths import TRANSACTION_CHUNK, BatchRelease, PathParts
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome
from storage_adapters import (
    ChunkSend,
    ChunkSettlement,
    ClaimedJob,
    StorageError,
    TransactionalReleaseStorage,
)

__all__ = ["TransactionalClaims"]

T = TypeVar("T")


logger = logging.getLogger(__name__)


class _RolledBackAfterSend(Exception):
    """A chunk's transaction failed after its send: not retried (see ``_release_chunk``)."""


class TransactionalClaims:
    releases_by_script = False

    def __init__(self, parts: PathParts) -> None:
        storage = parts.storage
        if not isinstance(storage, TransactionalReleaseStorage):
            raise TypeError(f"{type(storage).__name__} cannot release in a transaction")
        self._parts = parts
        self._transactions: TransactionalReleaseStorage = storage

    @property
    def label(self) -> str:
        """The metrics label of the jobs this path sends."""
        return self._parts.label

    def release_batch(self, held: HeldLock) -> BatchRelease:
        parts = self._parts
        ids = call_storage(lambda: parts.storage.fetch_due_ids(parts.batch_size))
        chunks = [ids[i : i + TRANSACTION_CHUNK] for i in range(0, len(ids), TRANSACTION_CHUNK)]
        counters = parts.pool.map(lambda chunk: self._release_chunk(chunk, held), chunks)
        outcomes = sum(counters, Counter[Outcome]())
        return BatchRelease(len(ids), outcomes, {parts.label: outcomes})

    def _release_chunk(self, job_ids: Sequence[str], lock: HeldLock) -> Counter[Outcome]:
        """Claim, send and settle a chunk of ``job_ids`` in one storage transaction (see
        ``TransactionalReleaseStorage``): what was sent is Enqueued by the commit, so there is
        no mark to make."""
        if self._parts.releaser.halted or not lock.valid():
            return Counter({Outcome.STOPPED: len(job_ids)})
        claims, outcomes = self.in_transaction(
            lock,
            len(job_ids),
            lambda send: self._transactions.release_in_transaction(job_ids, lock.lease, send),
        )
        if claims is not None:
            outcomes[Outcome.NOT_CLAIMED] += len(job_ids) - len(claims)
        return outcomes

    def in_transaction(
        self, lock: HeldLock, jobs: int, work: Callable[[ChunkSend], T]
    ) -> tuple[T | None, Counter[Outcome]]:
        """Run ``work``, one storage transaction that calls the send it is given on what it
        claimed (a release's chunk of ``jobs`` jobs, or a chunk's firings: ``firing.py``), and
        what the sends did. A transaction that fails before anything was sent is retried like
        any storage call; one that fails after a send is not (its jobs are Scheduled again and
        the next pass takes them: what was sent may run twice, and this scheduler halts): then
        ``None``."""
        releaser = self._parts.releaser
        sent: list[ClaimedJob] = []  # filled as soon as the broker took them
        settled: Counter[Outcome] = Counter()

        def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
            until = time.monotonic() + self._transactions.send_budget
            settled.update(releaser.hand_over(claims, lock, settlement, until, sent)[2])

        def attempt() -> T:
            try:
                return work(send)
            except StorageError as exc:
                if sent:  # sent, then rolled back: retrying would send them all again now
                    raise _RolledBackAfterSend(exc) from exc
                settled.clear()  # nothing went: the retry starts the chunk afresh
                raise

        try:
            done = call_storage(attempt)
        except _RolledBackAfterSend as rolled_back:
            releaser.halt()
            logger.warning(
                "%d job(s) whose send started while their claim was valid could not be "
                "committed: the chunk's transaction ended first (%s; this process stalled, or "
                "lost storage, during or after the send), so they are Scheduled again and may "
                "run twice: %s",
                len(sent),
                rolled_back.__cause__,
                ", ".join(claim.id for claim in sent),
            )
            return None, Counter({Outcome.FENCED: len(sent), Outcome.FAILED: jobs - len(sent)})
        if sent:
            settled[Outcome.RELEASED] += len(sent)
            releaser.notify(sent)
        return done, settled
