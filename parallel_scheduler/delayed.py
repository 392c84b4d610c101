"""DelayedJobScheduler: Hangfire 1.8.12's scheduler shape, for durable delayed jobs.

One pass: take ONE distributed scheduler lock -> recover claims whose owner died -> fetch a BATCH
of the earliest-due jobs -> release them in a BOUNDED THREAD POOL, each under its own per-job
claim -> repeat while a full batch came back -> release the lock. Between passes the scheduler
sleeps until the next due time it peeked from storage, or the poll interval, whichever is sooner.
Any number of scheduler processes may run; the lock makes one of them active at a time and
another takes over within a lease when it dies.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from types import FrameType
from typing import Any

from storage_adapters import Storage

from . import lock_lease
from .clock import StorageClock
from .dispatchers import Dispatcher
from .lock_lease import HeldLock
from .pool import BoundedPool
from .release import ReleaseListener, Releaser
from .retrying import call_storage
from .settings import Settings
from .stats import Outcome, PassStats

__all__ = ["DelayedJobScheduler"]

logger = logging.getLogger("parallel_scheduler.delayed")
MAX_BACKOFF = 30.0
MIN_CHUNK = 50  # batch mode: smaller chunks cost more in per-chunk overhead than they gain


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class DelayedJobScheduler:
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
    ) -> None:
        """``owns_storage``: ``close()`` closes the storage too (when this scheduler opened it)."""
        self.storage = storage
        self._owns_storage = owns_storage
        self.settings = settings or Settings()
        self.owner = owner or default_owner()
        self._clock = StorageClock(storage)
        self._pool = BoundedPool(self.settings.max_degree_of_parallelism)
        self._releaser = Releaser(
            storage, dispatcher, self._clock, self.settings.lock_lease, listeners
        )
        self._stopping = threading.Event()

    # -- one pass ---------------------------------------------------------------------------

    def run_once(self) -> PassStats:
        """One pass; returns what it did. Does nothing when another scheduler holds the lock."""
        started = time.monotonic()
        held = call_storage(
            lambda: lock_lease.acquire(
                self.storage, self.LOCK_NAME, self.owner, self.settings.lock_lease
            ),
            give_up_after=self.settings.lock_lease,
        )
        stats = PassStats(lock_acquired=held is not None)
        if held is None:
            return stats
        self._releaser.start_pass()
        try:
            stats.recovered = call_storage(self.storage.recover_expired_claims)
            self._clock.sync()
            while not self._stopping.is_set() and held.valid() and not self._releaser.halted:
                fetched, outcomes = self._release_batch(held)
                stats.add_batch(fetched, outcomes)
                if fetched < self.settings.batch_size:
                    break
        finally:
            held.release()
            stats.duration = time.monotonic() - started
        self._log(stats)
        return stats

    def _release_batch(self, held: HeldLock) -> tuple[int, Counter[Outcome]]:
        batch_size = self.settings.batch_size
        if self.settings.release_mode == "per_job":
            ids = call_storage(lambda: self.storage.fetch_due_ids(batch_size))
            outcomes = self._pool.map(lambda job_id: self._releaser.release_one(job_id, held), ids)
            return len(ids), Counter(outcomes)
        claims = call_storage(
            lambda: self.storage.claim_due(batch_size, held.lease, self.settings.lock_lease)
        )
        size = max(MIN_CHUNK, -(-len(claims) // self._pool.size))
        chunks = [claims[i : i + size] for i in range(0, len(claims), size)]
        counters = self._pool.map(lambda chunk: self._releaser.release_claims(chunk, held), chunks)
        return len(claims), sum(counters, Counter())

    def _log(self, stats: PassStats) -> None:
        if stats.fetched or stats.recovered:
            logger.info(
                "pass released %d of %d due job(s) in %.3f s (%d batch(es), %d expired, "
                "%d failed, %d not claimed, %d recovered claims)",
                stats.released,
                stats.fetched,
                stats.duration,
                stats.batches,
                stats.expired,
                stats.failed,
                stats.not_claimed,
                stats.recovered,
            )

    # -- the process loop -------------------------------------------------------------------

    def run_forever(self, *, install_signal_handlers: bool = True) -> None:
        """Run passes until ``stop()`` (or SIGINT/SIGTERM): in-flight jobs finish, lock released."""
        restore = self._install_signal_handlers() if install_signal_handlers else {}
        backoff = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    stats = self.run_once()
                except Exception:
                    logger.exception("scheduler pass failed; backing off")
                    backoff = min(MAX_BACKOFF, max(0.5, backoff * 2))
                    self._stopping.wait(backoff)
                    continue
                if stats.failed:
                    backoff = min(MAX_BACKOFF, max(0.5, backoff * 2))
                    delay = backoff
                else:
                    backoff = 0.0
                    delay = self._delay_after(stats)
                self._stopping.wait(delay)
        finally:
            for signum, handler in restore.items():
                signal.signal(signum, handler)
        logger.info("scheduler %s stopped", self.owner)

    def _delay_after(self, stats: PassStats) -> float:
        poll = self.settings.poll_interval
        if not stats.lock_acquired:
            return poll
        try:
            next_due = self.storage.next_due_at()
            now = self._clock.now()
        except Exception as exc:
            logger.warning("peeking the next due time failed: %s", exc)
            return poll
        if next_due is None:
            return poll
        return min(poll, max(0.0, next_due - now))

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handle(signum: int, frame: FrameType | None) -> None:
            logger.info("received signal %d: finishing in-flight jobs, then stopping", signum)
            self.stop()

        previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.getsignal(signum)
            signal.signal(signum, handle)
        return previous

    def stop(self) -> None:
        self._stopping.set()

    def close(self) -> None:
        """Stop and free the thread pool, and the storage if this scheduler owns it."""
        self.stop()
        self._pool.shutdown()
        if self._owns_storage:
            self.storage.close()
