"""The shape every scheduler shares: one distributed lock per pass, a bounded pool, and a loop
that sleeps until the next due time (or a wake-up), backs off while passes fail, and stops
gracefully: in-flight work finishes and the lock is released.

``DelayedJobScheduler`` and ``RecurringJobScheduler`` differ only in what one pass does.

An idle pass costs one storage round trip. Each pass of the loop first peeks when work is next
due (one statement or script, ``_next_work_at``); when that is later than the storage clock's
``now()`` (estimated locally, see clock.py), the pass is idle: no lock, no recovery, no fetch,
and the loop sleeps until the peeked time or a poll interval, whichever is sooner, without asking
again. (Retention purges beside the passes, in a thread of its own: see delayed/retention.py.)

Take-over: a holder that dies keeps the lock until its lease runs out (at most ``lock_lease``
after its last renewal, so at most one lease after its death). A scheduler that does not hold
the lock never sleeps longer than one lease between attempts to take it while work is due (not
even while backing off after failures), so a dead holder is replaced within ``lock_lease`` plus
``min(poll_interval, lock_lease)``. Its idle sleeps end when the work it peeked falls due, so
the work a dead holder left (due jobs, claims whose lease runs out) brings it to the lock. A
holder that stops gracefully releases the lock, and the next attempt takes it at once.

Shards (``shards`` > 1, see process/service.py): a scheduler then works on one shard's store
and runs its passes only while ``serving()`` says its shard is this process's. Otherwise a turn of
the loop takes no lock and makes no storage round trip: it waits for a wake-up (the service wakes
it when the assignment changes) or a poll interval. A pass in flight when its shard goes to
another process ends after its current batch, and releases the lock for the new owner.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import FrameType
from typing import Any, ClassVar, Generic, TypeVar

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.engine import held_lock
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.recorder import NULL_RECORDER, MetricsRecorder
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import SchedulerStats
from parallel_scheduler.settings import Settings
from storage_adapters import Storage

__all__ = ["LockedScheduler", "StatsT", "default_owner"]

logger = logging.getLogger(__name__)
#: The longest sleep after failing passes; never more than one lock lease (see the docstring).
MAX_BACKOFF = 30.0


def _always() -> bool:
    return True


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


#: The stats one pass of a given scheduler returns (``PassStats``, ``RecurringPassStats``).
StatsT = TypeVar("StatsT", bound=SchedulerStats)


class LockedScheduler(ABC, Generic[StatsT]):
    LOCK_NAME: ClassVar[str]

    def __init__(
        self,
        storage: Storage,
        settings: Settings | None,
        owner: str | None,
        owns_storage: bool,
        *,
        shard: int | None = None,
        serving: Callable[[], bool] | None = None,
        pool: BoundedPool | None = None,
    ) -> None:
        """``shard``: the shard whose store ``storage`` is (``None``: the whole store), named in
        the lock as shown (``delayed-scheduler#3``) and in metrics. ``serving``: whether to run
        passes now (default: always). ``pool``: a pool shared with other schedulers (``close``
        leaves it to its owner), instead of one of this scheduler's own."""
        self.storage = storage
        self.settings = settings or Settings()
        self.owner = owner or default_owner()
        self._owns_storage = owns_storage
        self._clock = StorageClock(storage)
        self.shard = shard
        self._serving = serving or _always
        self._owns_pool = pool is None
        self._pool = pool or BoundedPool(self.settings.max_degree_of_parallelism)
        self._stopping = threading.Event()
        self._wake = threading.Event()
        # storage clock; only the loop's thread reads or writes these two
        self._pass_began = -math.inf
        self._idle_until: float | None = None  # the last idle pass's peek: when work falls due
        #: Where passes report their metrics; ``SchedulerService`` sets it when metrics are on.
        self.metrics: MetricsRecorder = NULL_RECORDER
        #: For the liveness heartbeat (``liveness.py``), read from its thread: the lock while a
        #: pass holds it, and the last pass that held it or was idle, with when it ended (epoch
        #: seconds): an idle scheduler is alive and watching, not stuck.
        self.held: HeldLock | None = None
        self.last_pass: tuple[float, StatsT] | None = None
        #: When the last pass that held the lock ended (storage clock, estimated): what makes
        #: this instance the active one while the lock is free (an idle pass never sets it).
        self.last_held_at: float | None = None
        #: ``time.monotonic()`` of the loop's last sign of progress: each turn of the loop, and
        #: each batch of a pass. A loop whose stamp stops moving is stuck (``/healthz``, see
        #: process/loop_health.py): a pool that never returns, a storage call that never ends.
        self.progress_at = time.monotonic()

    @property
    def lock_label(self) -> str:
        """The lock as people see it: its name, with ``#<shard>`` for a shard's scheduler."""
        return self.LOCK_NAME if self.shard is None else f"{self.LOCK_NAME}#{self.shard}"

    def serving(self) -> bool:
        """True while this scheduler's shard is this process's to serve (always without shards)."""
        return self._serving()

    # -- what subclasses supply -----------------------------------------------------------------

    @abstractmethod
    def _new_stats(self, lock_acquired: bool) -> StatsT:
        """An empty stats object for one pass."""

    @abstractmethod
    def _pass(self, held: HeldLock, stats: StatsT) -> None:
        """The pass's work, under the held lock."""

    def _made_progress(self, stats: StatsT) -> bool:
        """Whether a pass moved any work (released, expired or fired something)."""
        return False

    @abstractmethod
    def _next_work_at(self) -> float | None:
        """When work next falls due (storage clock), in ONE storage round trip: the peek that
        lets a pass with nothing due end there, and the sleep after a pass. ``None``: no work."""

    # -- one pass ---------------------------------------------------------------------------

    def run_once(self) -> StatsT:
        """One pass of the loop; returns its stats. Idle when the peek finds nothing due by the
        storage clock: then it costs that one round trip, takes no lock and says ``idle``.
        Otherwise ``run_pass()``. An idle pass leaves the ``lock_held`` gauge as it was: that
        reports the last attempt to take the lock, and an idle pass makes none. A shard this process
        does not serve reports its lock as not held (it is someone else's)."""
        started = time.monotonic()
        if not self._serving():  # another process's shard: no lock, no round trip
            self._idle_until = None
            self.metrics.lock_held(self.LOCK_NAME, False, self._shard_label)  # not its lock now
            stats = self._new_stats(False)
            stats.idle = True
            return stats
        next_work = call_storage(self._next_work_at, give_up_after=self.settings.lock_lease)
        if next_work is None or next_work > self._clock.now():
            self._idle_until = next_work
            stats = self._new_stats(False)
            stats.idle = True
            stats.duration = time.monotonic() - started
            self.last_pass = (time.time(), stats)
            return stats
        return self.run_pass()

    def run_pass(self) -> StatsT:
        """One full pass whatever is due (``--once`` runs this); returns its stats. Does nothing
        when another scheduler holds the lock."""
        started = time.monotonic()
        held = call_storage(
            lambda: held_lock.acquire(
                self.storage, self.LOCK_NAME, self.owner, self.settings.lock_lease
            ),
            give_up_after=self.settings.lock_lease,
        )
        stats = self._new_stats(held is not None)
        self.metrics.lock_held(self.LOCK_NAME, held is not None, self._shard_label)
        if held is None:
            return stats
        self.held = held
        try:
            self._pass_began = self._clock.now()  # no round trip: the clock refreshes itself
            self._pass(held, stats)
        finally:
            held.release()
            self.held = None
            stats.duration = time.monotonic() - started
            self.last_pass = (time.time(), stats)
            self.last_held_at = time.time() + self._clock.offset  # no round trip
            self.metrics.pass_seconds(self.LOCK_NAME.removesuffix("-scheduler"), stats.duration)
        return stats

    @property
    def _shard_label(self) -> str:
        return str(self.shard or 0)

    def _keep_going(self, held: HeldLock) -> bool:
        self.progress_at = time.monotonic()  # a pass asks before each batch
        return not self._stopping.is_set() and held.valid() and self._serving()

    # -- the process loop -------------------------------------------------------------------

    def run_forever(self, *, install_signal_handlers: bool = True) -> None:
        """Run passes until ``stop()`` (or SIGINT/SIGTERM): in-flight work finishes, lock freed."""
        restore = self._install_signal_handlers() if install_signal_handlers else {}
        backoff = 0.0
        max_backoff = min(MAX_BACKOFF, self.settings.lock_lease)
        try:
            while not self._stopping.is_set():
                self.progress_at = time.monotonic()
                try:
                    stats = self.run_once()
                except Exception:
                    logger.exception("%s pass failed; backing off", self.lock_label)
                    stats = self._new_stats(False)
                    stats.failed = 1
                if stats.failed:
                    backoff = min(max_backoff, max(0.5, backoff * 2))
                    delay = backoff
                else:
                    backoff = 0.0
                    delay = self._delay_after(stats)
                self.progress_at = time.monotonic()
                self._wake.wait(delay)
                self._wake.clear()
        finally:
            for signum, handler in restore.items():
                signal.signal(signum, handler)
            self.metrics.lock_held(self.LOCK_NAME, False, self._shard_label)
        logger.info("%s %s stopped", self.lock_label, self.owner)

    def _delay_after(self, stats: StatsT) -> float:
        poll = self.settings.poll_interval
        if stats.idle:  # until the work its peek saw falls due: no second round trip
            if self._idle_until is None:
                return poll
            return min(poll, max(0.0, self._idle_until - self._clock.now()))
        if not stats.lock_acquired:  # try again within a lease: take-over must not wait longer
            return min(poll, self.settings.lock_lease)
        try:
            next_due = self._next_work_at()
            now = self._clock.now()
        except Exception as exc:
            logger.warning("peeking the next due time failed: %s", exc)
            return poll
        if next_due is None:
            return poll
        if next_due <= self._pass_began:
            # Work already due when the pass began is still waiting. After a pass that moved
            # work (it stopped at its lease or time budget, say) the next one starts at once; a
            # pass that moved nothing could not take it (another process holds its rows: a
            # stalled holder's open transaction keeps them locked until it resumes or dies),
            # and retrying that at once would spin.
            return 0.0 if self._made_progress(stats) else poll
        return min(poll, max(0.0, next_due - now))

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handle(signum: int, frame: FrameType | None) -> None:
            logger.info("received signal %d: finishing in-flight work, then stopping", signum)
            self.stop()

        previous: dict[int, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.getsignal(signum)
            signal.signal(signum, handle)
        return previous

    def wake(self) -> None:
        """Cut the current sleep short: new work is due now."""
        self._wake.set()

    def stop(self) -> None:
        """Ask the loop to end: ``run_forever`` returns once the pass in flight has finished and
        the lock is released. Safe from any thread or a signal handler."""
        self._stopping.set()
        self._wake.set()

    def close(self) -> None:
        """Stop and free the thread pool, and the storage if this scheduler owns it."""
        self.stop()
        if self._owns_pool:
            self._pool.shutdown()
        if self._owns_storage:
            self.storage.close()
