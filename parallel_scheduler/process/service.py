"""One scheduler process: the delayed and the recurring scheduler side by side, each under its
own lock, started and stopped together. A recurring pass that fires wakes the delayed scheduler,
so a firing reaches the broker without waiting out a poll interval. With ``metrics_port`` set,
it also serves Prometheus metrics from ``start()`` to ``stop()`` (``metrics.py``). From
``start()`` to ``stop()`` it heartbeats its liveness record in storage (``liveness.py``). The
metrics endpoint answers ``/healthz`` with ``loop_problems()``: 503 once a loop is dead or stuck
(``loop_health.py``).

With ``shards`` = S > 1 the store is S stores (storage_adapters/sharding.py), and the service
runs one delayed and one recurring scheduler per shard, each on its shard's store under that
shard's own locks, so several processes release at once. Each process serves the shards that
``process/shard_assignment.py`` gives it among the live instances, refreshed at every heartbeat: the
loop of a shard it does not serve takes no lock and makes no round trip, and its loop thread is
only started once the shard is first served. A recurring firing lives in its recurring job's
shard, so a recurring pass wakes the delayed scheduler of the same shard. The schedulers of a
kind share one bounded pool, so ``max_degree_of_parallelism`` bounds the whole process's
releases, not each shard's. ``delayed``/``recurring`` remain the schedulers over the whole store:
the loops with one shard, and with S > 1 what a one-off pass (``run --once``) uses, taking
every shard's lock (see sharded_storage.py).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from parallel_scheduler.delayed.sending import ReleaseListener
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.process.assembly import ServiceParts, assemble
from parallel_scheduler.process.loop_health import loop_problems
from parallel_scheduler.process.shard_assignment import describe_shards
from parallel_scheduler.queues import QueueRouter
from parallel_scheduler.settings import Settings
from storage_adapters import Storage

__all__ = ["SchedulerService"]

logger = logging.getLogger(__name__)
#: How long ``stop()`` waits for the passes in flight to end. A pass ends once its batch in
#: flight is sent and marked, which can outlast a lock lease (the lock is renewed meanwhile), so
#: the wait is not tied to the lease: at least this long, or one lease if that is longer.
STOP_GRACE = 30.0


class SchedulerService:
    def __init__(self, parts: ServiceParts, *, owns_storage: bool = False) -> None:
        """The service over ``parts`` (``assemble``'s, or ``build()``'s); ``owns_storage``:
        ``close()`` closes the storage too."""
        self.storage = parts.storage
        self._owns_storage = owns_storage
        self.settings = parts.settings
        self.owner = parts.owner
        #: The ``/metrics`` endpoint, or ``None`` when ``metrics_port`` is not set.
        self.metrics = parts.metrics
        self.delayed = parts.delayed
        self.recurring = parts.recurring
        #: Which shards this process serves (``None`` without shards: the one store, always).
        self.assignment = parts.assignment
        #: The schedulers whose loops run, one per shard in shard order (without shards:
        #: ``[delayed]`` and ``[recurring]``).
        self.delayed_shards = parts.delayed_shards
        self.recurring_shards = parts.recurring_shards
        #: This process's liveness record; its id is the lock owner, so a lock holder names it.
        self.heartbeat = parts.heartbeat
        self._parts = parts
        self._threads: dict[LockedScheduler[Any], threading.Thread] = {}
        self._threads_guard = threading.Lock()
        self._started = False
        self._stopped = threading.Event()
        if self.assignment is not None:
            self.assignment.on_change = self._assignment_changed
        if self.metrics is not None:
            self.metrics.health = self.loop_problems

    @classmethod
    def build(
        cls,
        storage: Storage,
        dispatcher: Dispatcher,
        settings: Settings | None = None,
        *,
        owner: str | None = None,
        listeners: tuple[ReleaseListener, ...] = (),
        owns_storage: bool = False,
        route: QueueRouter | None = None,
    ) -> SchedulerService:
        """A service for ``storage``, wired by ``assemble`` (see there)."""
        parts = assemble(
            storage, dispatcher, settings, owner=owner, listeners=listeners, route=route
        )
        return cls(parts, owns_storage=owns_storage)

    def served_shards(self) -> frozenset[int]:
        """The shards this process serves now (``{0}`` without shards)."""
        return frozenset({0}) if self.assignment is None else self.assignment.served

    def loop_problems(self) -> list[str]:
        """One line per loop that is dead or stuck (``loop_health.py``); none while every loop
        this process runs makes progress. Before ``start()`` and after ``stop()`` the service
        itself is the problem."""
        with self._threads_guard:
            if not self._started or self._stopped.is_set():
                return ["the scheduler service is not running"]
            loops = dict(self._threads)
        return loop_problems(loops, self.settings)

    def _looping(self) -> list[LockedScheduler[Any]]:
        """The schedulers whose loops run: every shard's, both kinds."""
        return [*self.delayed_shards, *self.recurring_shards]

    def _start_loops(self, shards: Sequence[int] | frozenset[int]) -> None:
        """Start the loop threads of ``shards`` that have none yet (not after ``stop()``)."""
        with self._threads_guard:
            if not self._started or self._stopped.is_set():
                return
            for shard in sorted(shards):
                for scheduler in (self.delayed_shards[shard], self.recurring_shards[shard]):
                    if scheduler in self._threads:
                        continue
                    thread = threading.Thread(
                        target=scheduler.run_forever,
                        kwargs={"install_signal_handlers": False},
                        name=scheduler.lock_label,
                        daemon=True,
                    )
                    thread.start()
                    self._threads[scheduler] = thread

    def _assignment_changed(self, before: frozenset[int], after: frozenset[int]) -> None:
        """From the heartbeat thread: wake the loops of the shards that changed hands (a loop
        given a shard starts at once, one losing it ends its pass after the current batch)."""
        live = 0 if self.assignment is None else len(self.assignment.live)
        logger.info(
            "serving %d of %d shards among %d live scheduler(s): %s",
            len(after),
            self.settings.shards,
            live,
            describe_shards(after),
        )
        self._start_loops(after)
        for shard in before ^ after:
            self.delayed_shards[shard].wake()
            self.recurring_shards[shard].wake()
            if self.metrics is not None and shard not in after:
                for scheduler in (self.delayed_shards[shard], self.recurring_shards[shard]):
                    self.metrics.recorder.lock_held(scheduler.LOCK_NAME, False, str(shard))

    def start(self) -> None:
        """Run the schedulers in background threads (and serve the metrics, when asked). With
        shards, the heartbeat's first look at the live instances decides which shards' loops
        start; others start as shards are handed to this process."""
        if self.metrics is not None:
            self.metrics.start()
        self.heartbeat.start()
        with self._threads_guard:
            self._started = True
        self._start_loops(self.served_shards())

    def run(self, *, install_signal_handlers: bool = True) -> bool:
        """Run until ``stop()`` or SIGINT/SIGTERM, then stop both gracefully. ``False`` when it
        ended because a loop thread died instead (logged as an error naming it), so the command
        exits non-zero and a supervisor restarts it."""
        stopped = self._stopped
        previous: dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():

            def handle(signum: int, frame: FrameType | None) -> None:
                logger.info("received signal %d: finishing in-flight work, then stopping", signum)
                stopped.set()

            for number in (signal.SIGINT, signal.SIGTERM):
                previous[number] = signal.getsignal(number)
                signal.signal(number, handle)
        self.start()
        dead: list[str] = []
        try:
            while not stopped.wait(0.5):
                with self._threads_guard:
                    threads = list(self._threads.values())
                dead = [t.name for t in threads if not t.is_alive()]
                if dead:
                    logger.error("%s ended unexpectedly: stopping this process", ", ".join(dead))
                    break
        finally:
            self.stop()
            for previous_number, handler in previous.items():
                signal.signal(previous_number, handler)
        return not dead

    def stop(self) -> None:
        """Stop every loop; in-flight work finishes and the locks are released before this
        returns; then the liveness record is removed, so the others take over at once."""
        with self._threads_guard:
            self._stopped.set()
            threads = list(self._threads.values())
            self._threads.clear()
        for scheduler in self._parts.schedulers():
            scheduler.stop()
        deadline = time.monotonic() + max(STOP_GRACE, self.settings.lock_lease)
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.warning("%s is still finishing its pass; not waiting longer", thread.name)
        self.heartbeat.stop()
        if self.metrics is not None:
            self.metrics.stop()

    def close(self) -> None:
        self.stop()
        for scheduler in self._parts.schedulers():
            scheduler.close()
        for pool in self._parts.pools:
            pool.shutdown()
        if self._owns_storage:
            self.storage.close()
