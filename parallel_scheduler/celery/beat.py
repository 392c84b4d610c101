"""A replacement for Celery beat, safe on many hosts:

    celery -A proj beat -S parallel_scheduler.celery.beat:DurableScheduler

The scheduler class only; how ``beat_schedule`` entries become recurring jobs is ``beat_sync.py``
(synced each time a scheduler starts, this one included).
"""

from __future__ import annotations

from typing import Any

from celery import beat

from parallel_scheduler.celery.integration import get_integration
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.process.startup import log_start

__all__ = ["DurableScheduler"]


class DurableScheduler(beat.Scheduler):  # type: ignore[misc]
    """``celery beat -S parallel_scheduler.celery.beat:DurableScheduler``: safe on many hosts.

    Beat's own loop only keeps the process alive; the firing is done by parallel-scheduler's
    schedulers, which run here in background threads under their distributed locks.
    """

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        self._service: SchedulerService | None = None
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        self._service = get_integration(self.app).make_service()
        log_start(self._service)
        self._service.start()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        return float(self.max_interval)

    @property
    def info(self) -> str:
        return "    . parallel-scheduler: durable, exactly once per tick"

    def sync(self) -> None:
        """Nothing to write: the store is the schedule."""

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
            self._service = None
        super().close()
