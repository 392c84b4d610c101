"""One scheduler process: the delayed and the recurring scheduler side by side, each under its
own lock, started and stopped together. A recurring pass that fires wakes the delayed scheduler,
so a firing reaches the broker without waiting out a poll interval. With ``metrics_port`` set,
it also serves Prometheus metrics from ``start()`` to ``stop()`` (see ``metrics.py``). From
``start()`` to ``stop()`` it heartbeats its liveness record in storage (see ``instances.py``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType
from typing import Any

from storage_adapters import Storage

from .delayed_scheduler import DelayedJobScheduler
from .dispatchers import Dispatcher
from .instances import Heartbeat
from .locked_scheduler import default_owner
from .metrics import MetricsServer
from .recurring_scheduler import RecurringJobScheduler
from .release import ReleaseListener
from .settings import Settings

__all__ = ["SchedulerService"]

logger = logging.getLogger(__name__)
#: How long ``stop()`` waits for the passes in flight to end. A pass ends once its batch in
#: flight is sent and marked, which can outlast a lock lease (the lock is renewed meanwhile), so
#: the wait is not tied to the lease: at least this long, or one lease if that is longer.
STOP_GRACE = 30.0


class SchedulerService:
    def __init__(
        self,
        storage: Storage,
        dispatcher: Dispatcher,
        settings: Settings | None = None,
        *,
        owner: str | None = None,
        listeners: tuple[ReleaseListener, ...] = (),
        owns_storage: bool = False,
    ) -> None:
        owner = owner or default_owner()
        settings = settings or Settings()
        self.storage = storage
        self._owns_storage = owns_storage
        #: The ``/metrics`` endpoint, or ``None`` when ``metrics_port`` is not set.
        self.metrics: MetricsServer | None = None
        if settings.metrics_port is not None:
            self.metrics = MetricsServer(storage, settings.metrics_host, settings.metrics_port)
            listeners = (*listeners, self.metrics.on_released)
        self.delayed = DelayedJobScheduler(
            storage, dispatcher, settings, owner=owner, listeners=listeners
        )
        self.recurring = RecurringJobScheduler(
            storage, settings, owner=owner, on_fired=self.delayed.wake
        )
        self.settings = self.delayed.settings
        self.owner = owner
        if self.metrics is not None:
            self.delayed.metrics = self.recurring.metrics = self.metrics.recorder
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()
        #: This process's liveness record; its id is the lock owner, so a lock holder names it.
        self.heartbeat = Heartbeat(
            storage, owner, self.settings, {"delayed": self.delayed, "recurring": self.recurring}
        )
        if self.metrics is not None:
            heartbeat = self.heartbeat
            self.metrics.recorder.follow_heartbeat(lambda: heartbeat.last_beat)

    def start(self) -> None:
        """Run both schedulers in background threads (and serve the metrics, when asked)."""
        if self.metrics is not None:
            self.metrics.start()
        self.heartbeat.start()
        for scheduler in (self.delayed, self.recurring):
            thread = threading.Thread(
                target=scheduler.run_forever,
                kwargs={"install_signal_handlers": False},
                name=scheduler.LOCK_NAME,
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Run until ``stop()`` or SIGINT/SIGTERM, then stop both gracefully."""
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
        try:
            while not stopped.wait(0.5):
                if not all(t.is_alive() for t in self._threads):
                    break
        finally:
            self.stop()
            for previous_number, handler in previous.items():
                signal.signal(previous_number, handler)

    def stop(self) -> None:
        """Stop both; in-flight work finishes and both locks are released before this returns."""
        self._stopped.set()
        for scheduler in (self.delayed, self.recurring):
            scheduler.stop()
        deadline = time.monotonic() + max(STOP_GRACE, self.settings.lock_lease)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.warning("%s is still finishing its pass; not waiting longer", thread.name)
        self._threads.clear()
        self.heartbeat.stop()
        if self.metrics is not None:
            self.metrics.stop()

    def close(self) -> None:
        self.stop()
        self.delayed.close()
        self.recurring.close()
        if self._owns_storage:
            self.storage.close()
