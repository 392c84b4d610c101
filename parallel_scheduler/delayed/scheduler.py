"""DelayedJobScheduler: Hangfire 1.8.12's scheduler shape, for durable delayed jobs.

One pass: take ONE distributed scheduler lock -> recover claims whose owner died -> fetch a BATCH
of the earliest-due jobs -> release them in a BOUNDED THREAD POOL, each under its own per-job
claim -> repeat while a full batch came back -> release the lock. Between passes the scheduler
sleeps until the next due time (or claim lease end) it peeked from storage, or the poll interval,
whichever is sooner; a pass whose peek finds nothing due ends there, at one round trip.
Any number of scheduler processes may run; the lock makes one of them active at a time and
another takes over within a lease (plus a poll interval) when it dies. With shards, one such
scheduler runs per shard, on the shard's own store and lock (see process/service.py).

On PostgreSQL, ``batch`` mode takes the storage's transactional release
(``TransactionalReleaseStorage``): the batch's ids are read in one query, and each pool thread
claims its chunk of them (``FOR UPDATE SKIP LOCKED``: the per-job locks), sends it and
settles it in one transaction, so a job's row is written once and no mark statement is needed;
its chunks are ``TRANSACTION_CHUNK`` jobs (see there).

What a crash or a stall can duplicate is what was sent and not yet marked Enqueued (or, in a
chunk's transaction, not yet committed): in ``per_job`` mode one job per pool thread; in
``batch`` mode one chunk per pool thread, since each thread settles its chunk right after
sending it, before it takes the next. So the bound is ``max_degree_of_parallelism`` jobs, or
``min(batch_size, max_degree_of_parallelism * chunk_for(storage))``. Jobs the one-script path moves
(``release_to_lists``) are pushed and marked atomically: none.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from parallel_scheduler.delayed.envelopes import script_release_for
from parallel_scheduler.delayed.release import ReleaseListener, Releaser
from parallel_scheduler.delayed.retention import RetentionPurger
from parallel_scheduler.dispatchers import Dispatcher, release_path
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.recorder import record_outcomes
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome, PassStats
from parallel_scheduler.log_format import pass_event
from parallel_scheduler.settings import Settings
from storage_adapters import ClaimedJob, Storage, TransactionalReleaseStorage

__all__ = ["CHUNK", "TRANSACTION_CHUNK", "DelayedJobScheduler", "chunk_for"]

logger = logging.getLogger(__name__)
#: Batch mode sends and then marks this many jobs at a time, per pool thread. It bounds what a
#: crash or a stall can send twice (one chunk per thread); smaller chunks would cost more in
#: per-chunk round trips (a mark, and with ``fast_publish`` a broker push) than they gain.
CHUNK = 50
#: On storage that releases a chunk in one transaction (PostgreSQL) a chunk is larger: each one
#: costs a transaction (three round trips and a commit) and a broker push, and at 50 jobs those
#: were most of the release's time (measured, ``benchmarks/limits.py --only pg-release``: 42%
#: of the raw limit at 50, 65-73% at 250, 75% at 500). It is also what a crash can send twice
#: per pool thread: ``min(batch_size, max_degree_of_parallelism * 250)``, one default batch.
TRANSACTION_CHUNK = 250


def chunk_for(storage: Storage) -> int:
    """Jobs a pool thread sends before it settles them, in ``batch`` mode on ``storage``."""
    return TRANSACTION_CHUNK if isinstance(storage, TransactionalReleaseStorage) else CHUNK


class DelayedJobScheduler(LockedScheduler[PassStats]):
    LOCK_NAME = "delayed-scheduler"

    def __init__(
        self,
        storage: Storage,
        dispatcher: Dispatcher,
        settings: Settings | None = None,
        *,
        owner: str | None = None,
        listeners: Sequence[ReleaseListener] = (),
        owns_storage: bool = False,
        shard: int | None = None,
        serving: Callable[[], bool] | None = None,
        pool: BoundedPool | None = None,
    ) -> None:
        """``owns_storage``: ``close()`` closes the storage too (when this scheduler opened it).
        ``shard``, ``serving``, ``pool``: for one shard of a sharded store (see
        ``LockedScheduler``); retention then purges that shard, only while it is served."""
        super().__init__(
            storage, settings, owner, owns_storage, shard=shard, serving=serving, pool=pool
        )
        self._dispatcher = dispatcher
        self._releaser = Releaser(
            storage,
            dispatcher,
            self._clock,
            self.settings.lock_lease,
            listeners,
            self.settings.max_send_attempts,
        )
        self._script_release = script_release_for(storage, dispatcher)
        #: Batch mode on a storage that claims, sends and settles a chunk in one transaction
        #: (PostgreSQL): no mark per chunk, one row write per job.
        self._in_transaction = (
            storage
            if self.settings.release_mode == "batch"
            and isinstance(storage, TransactionalReleaseStorage)
            else None
        )
        self._list_db: int | None = None
        self._list_db_known = False
        #: Deletes old finished jobs beside the passes, in a thread and under a lock of its own,
        #: from ``run_forever()`` to its end (retention.py): a pass never waits for a purge.
        self.purger = RetentionPurger(
            storage,
            self._clock,
            self.settings.retention,
            self.owner,
            self.settings.lock_lease,
            serving=self.serving,
        )

    @property
    def releases_by_script(self) -> bool:
        """True once a pass found storage and broker on one Redis server (envelopes.py)."""
        return self._list_db is not None

    @property
    def dispatcher(self) -> Dispatcher:
        """Where the passes hand jobs over (the start-up line names its publish path)."""
        return self._dispatcher

    def run_forever(self, *, install_signal_handlers: bool = True) -> None:
        """The pass loop, with retention's purger running beside it until the loop ends."""
        self.purger.start()
        try:
            super().run_forever(install_signal_handlers=install_signal_handlers)
        finally:
            self.purger.stop()

    def close(self) -> None:
        self.purger.stop()
        super().close()

    def _new_stats(self, lock_acquired: bool) -> PassStats:
        return PassStats(lock_acquired=lock_acquired)

    def _pass(self, held: HeldLock, stats: PassStats) -> None:
        self._releaser.start_pass()
        script = self._script_release
        if not self._list_db_known and script is not None and self.settings.release_mode == "batch":
            self._list_db = call_storage(script.list_db)
            self._list_db_known = True
        stats.recovered = call_storage(self.storage.recover_expired_claims)
        self.metrics.claims_recovered(stats.recovered)
        while self._keep_going(held) and not self._releaser.halted:
            fetched, outcomes = self._release_batch(held)
            stats.add_batch(fetched, outcomes)
            if fetched < self.settings.batch_size:
                break
        self._log(stats)

    def _release_batch(self, held: HeldLock) -> tuple[int, Counter[Outcome]]:
        batch_size = self.settings.batch_size
        if self.settings.release_mode == "per_job":
            ids = call_storage(lambda: self.storage.fetch_due_ids(batch_size))
            outcomes = Counter(
                self._pool.map(lambda job_id: self._releaser.release_one(job_id, held), ids)
            )
            record_outcomes(self.metrics, "per_job", outcomes)
            return len(ids), outcomes
        if self._in_transaction is not None:
            return self._release_in_transactions(self._in_transaction, held)
        lease = self.settings.lock_lease
        moved: list[ClaimedJob] = []
        claimed_at = time.monotonic()  # before the claim request: see Releaser.release_claims
        if self._list_db is not None and self._script_release is not None:
            db, script = self._list_db, self._script_release
            moved, claims = call_storage(lambda: script.release(batch_size, held.lease, lease, db))
            self._releaser.notify(moved)
        else:
            claims = call_storage(lambda: self.storage.claim_due(batch_size, held.lease, lease))
        chunks = [claims[i : i + CHUNK] for i in range(0, len(claims), CHUNK)]
        counters = self._pool.map(
            lambda chunk: self._releaser.release_claims(chunk, held, claimed_at), chunks
        )
        outcomes = sum(counters, Counter[Outcome]())
        self.metrics.released("one_script", len(moved))
        path = release_path(self._dispatcher)
        record_outcomes(self.metrics, path, outcomes)
        return len(moved) + len(claims), outcomes + Counter({Outcome.RELEASED: len(moved)})

    def _release_in_transactions(
        self, storage: TransactionalReleaseStorage, held: HeldLock
    ) -> tuple[int, Counter[Outcome]]:
        """The batch's ids, read in one query, released a ``TRANSACTION_CHUNK`` per pool thread,
        each chunk claimed, sent and settled in one transaction of its own (PostgreSQL)."""
        ids = call_storage(lambda: self.storage.fetch_due_ids(self.settings.batch_size))
        size = chunk_for(self.storage)
        chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
        counters = self._pool.map(
            lambda chunk: self._releaser.release_in_transaction(storage, chunk, held), chunks
        )
        outcomes = sum(counters, Counter[Outcome]())
        record_outcomes(self.metrics, release_path(self._dispatcher), outcomes)
        return len(ids), outcomes

    def _made_progress(self, stats: PassStats) -> bool:
        return stats.released + stats.expired + stats.backed_off + stats.set_aside > 0

    def _next_work_at(self) -> float | None:
        """Due jobs, and claims whose lease runs out (the pass recovers those first)."""
        return self.storage.next_work_at()

    def _log(self, stats: PassStats) -> None:
        if stats.fetched or stats.recovered:
            logger.info(
                "pass released %d of %d due job(s) (%d batch(es), %d expired, %d failed, "
                "%d not claimed, %d recovered claims, %d that cannot be sent backed off, "
                "%d set aside as failed)",
                stats.released,
                stats.fetched,
                stats.batches,
                stats.expired,
                stats.failed,
                stats.not_claimed,
                stats.recovered,
                stats.backed_off,
                stats.set_aside,
                extra=pass_event(stats.as_dict()),
            )
