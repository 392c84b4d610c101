"""DelayedJobScheduler: Hangfire 1.8.12's scheduler shape, for durable delayed jobs.

One pass: take ONE distributed scheduler lock -> recover claims whose owner died -> fetch a BATCH
of the earliest-due jobs -> release them in a BOUNDED THREAD POOL, each under its own per-job
claim -> repeat while a full batch came back -> release the lock. Between passes the scheduler
sleeps until the next due time (or claim lease end) it peeked from storage, or the poll interval,
whichever is sooner; a pass whose peek finds nothing due ends there, at one round trip.
Any number of scheduler processes may run; the lock makes one of them active at a time and
another takes over within a lease (plus a poll interval) when it dies. With shards, one such
scheduler runs per shard, on the shard's own store and lock (see process/service.py).

How a batch is claimed and sent is the release path chosen when the scheduler is built
(``paths.py``): per job, batch, one script or one transaction per chunk; what a crash or a
stall can send twice is bounded there.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from parallel_scheduler.delayed.claim_in_transaction import TransactionalClaims
from parallel_scheduler.delayed.claim_one_script import OneScriptRelease
from parallel_scheduler.delayed.path_choice import choose_path
from parallel_scheduler.delayed.rate_limiting import ReleaseLimits
from parallel_scheduler.delayed.retention import RetentionPurger
from parallel_scheduler.delayed.sending import ReleaseListener, Releaser
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.recorder import record_outcomes
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import Outcome, PassStats
from parallel_scheduler.log_format import pass_event
from parallel_scheduler.settings import Settings
from storage_adapters import ChunkSend, ClaimedJob, RateLimitStore, Storage

__all__ = ["DelayedJobScheduler"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DelayedJobScheduler(LockedScheduler[PassStats]):
    """Releases due delayed jobs from ``storage`` to ``dispatcher``, one locked pass at a time.

    Each pass takes the store's one scheduler lock, makes the claims of dead claimers due again,
    fetches batches of the earliest-due jobs and releases them in a bounded thread pool by the
    release path the settings and the storage choose (see the module docstring). Any number of
    these may run against one store, in any number of processes: one is active at a time. Most
    programs do not build one: ``parallel-scheduler run`` and the Celery plugin run it (with the
    recurring scheduler) for you; build one to release to a dispatcher of your own, or to run
    passes under your own control.

    :param storage: the store to release from (``storage_adapters.from_url(url)``).
    :param dispatcher: where due jobs are handed over (a ``Dispatcher``).
    :param settings: how to run (``Settings()`` when ``None``).
    :param owner: the lock owner id this scheduler acts as (a unique one when ``None``).
    :param listeners: called with what each release sent (metrics, tests, benchmarks).
    :param owns_storage: ``close()`` closes the storage too.
    :param shard: for one shard of a sharded store, with ``serving`` and ``pool``.
    :param serving: for a shard: asked before each pass whether this process serves the shard.
    :param pool: for a shard: the thread pool shared by the process's schedulers.

    Example, one pass to a function::

        from storage_adapters import from_url

        storage = from_url("sqlite:///jobs.db")
        scheduler = DelayedJobScheduler(storage, CallableDispatcher(send), Settings(batch_size=500))
        stats = scheduler.run_once()  # or run_forever() until stop() or SIGTERM
        scheduler.close()
    """

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
        limits: RateLimitStore | None = None,
    ) -> None:
        """``owns_storage``: ``close()`` closes the storage too (when this scheduler opened it).
        ``shard``, ``serving``, ``pool``: for one shard of a sharded store (see
        ``LockedScheduler``); retention then purges that shard, only while it is served.
        ``limits``: where the rate limits are kept, when not in ``storage`` (a shard's scheduler
        spends from the whole sharded store's one budget)."""
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
            ReleaseLimits(storage if limits is None else limits),
        )
        self._path = choose_path(storage, dispatcher, self.settings, self._releaser, self._pool)
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
        return self._path.releases_by_script

    @property
    def firing_list_db(self) -> int | None:
        """The broker database the recurring scheduler of this store may push due firings into
        (``recurring/firing.py``) when storage and broker share a Redis server (asked once) and
        no rate limit is in force, else ``None``."""
        path = self._path
        if not isinstance(path, OneScriptRelease) or self._releaser.limits.active_now():
            return None  # a firing of a limited queue or task waits for its slot like any job
        return path.list_db()

    def firings_pushed(self, jobs: Sequence[ClaimedJob]) -> None:
        """Firings the recurring scheduler pushed onto the broker: counted and announced as this
        scheduler's one-script releases, so metrics and listeners see every release."""
        self._releaser.notify(jobs)
        record_outcomes(self.metrics, "one_script", Counter({Outcome.RELEASED: len(jobs)}))

    def send_firings(self, lock: HeldLock, jobs: int, work: Callable[[ChunkSend], T]) -> T | None:
        """Run ``work``, a firing step that sends the due firings it writes in its own
        transaction (``TransactionalFiringStorage``), with this scheduler's sends, counted as
        its releases; ``None`` when this store releases otherwise, a rate limit is in force (a
        firing of a limited queue or task waits for its slot like any job), this scheduler has
        halted, or the step was rolled back after a send (``TransactionalClaims``)."""
        path = self._path
        releaser = self._releaser
        if not isinstance(path, TransactionalClaims) or releaser.halted:
            return None
        if releaser.limits.active_now():
            return None
        done, outcomes = path.in_transaction(lock, jobs, work)
        record_outcomes(self.metrics, path.label, outcomes)
        return done

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
        """Stop the retention purger and the passes, free the thread pool, and close the storage
        if this scheduler owns it."""
        self.purger.stop()
        super().close()

    def _new_stats(self, lock_acquired: bool) -> PassStats:
        return PassStats(lock_acquired=lock_acquired)

    def _pass(self, held: HeldLock, stats: PassStats) -> None:
        self._releaser.start_pass(self.metrics)
        stats.recovered = call_storage(self.storage.recover_expired_claims)
        self.metrics.claims_recovered(stats.recovered)
        while self._keep_going(held) and not self._releaser.halted:
            batch = self._path.release_batch(held)
            for label, outcomes in batch.by_label.items():
                record_outcomes(self.metrics, label, outcomes)
            stats.add_batch(batch.fetched, batch.outcomes)
            if batch.fetched < self.settings.batch_size:
                break
        if stats.deferred:
            self.storage.after_deferring(stats.deferred)
        self._log(stats)

    def _made_progress(self, stats: PassStats) -> bool:
        done = stats.released + stats.expired + stats.backed_off + stats.set_aside
        return done + stats.deferred > 0

    def _next_work_at(self) -> float | None:
        """Due jobs, and claims whose lease runs out (the pass recovers those first)."""
        return self.storage.next_work_at()

    def _log(self, stats: PassStats) -> None:
        if stats.fetched or stats.recovered:
            logger.info(
                "pass released %d of %d due job(s) (%d batch(es), %d expired, %d failed, "
                "%d not claimed, %d recovered claims, %d that cannot be sent backed off, "
                "%d set aside as failed, %d waiting for a rate limit)",
                stats.released,
                stats.fetched,
                stats.batches,
                stats.expired,
                stats.failed,
                stats.not_claimed,
                stats.recovered,
                stats.backed_off,
                stats.set_aside,
                stats.deferred,
                extra=pass_event(stats.as_dict()),
            )
