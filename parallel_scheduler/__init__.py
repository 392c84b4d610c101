"""parallel-scheduler: durable, parallel delayed job scheduling for Celery-style task queues."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parallel_scheduler.client import Client, ScheduleResult
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.dispatchers import CallableDispatcher, Dispatcher
from parallel_scheduler.engine.stats import Outcome, PassStats
from parallel_scheduler.errors import (
    ConfigurationError,
    DispatchError,
    InvalidItemError,
    InvalidJobError,
    MissingExtraError,
    ParallelSchedulerError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from parallel_scheduler.jobs import Job, JobSpec
from parallel_scheduler.settings import Settings
from parallel_scheduler.version import __version__
from storage_adapters import JobState

if TYPE_CHECKING:
    from parallel_scheduler.celery.publish.send_task import CeleryDispatcher


__all__ = [
    "CallableDispatcher",
    "CeleryDispatcher",
    "Client",
    "ConfigurationError",
    "DelayedJobScheduler",
    "DispatchError",
    "Dispatcher",
    "InvalidItemError",
    "InvalidJobError",
    "Job",
    "JobSpec",
    "JobState",
    "MissingExtraError",
    "Outcome",
    "ParallelSchedulerError",
    "PassStats",
    "ScheduleResult",
    "Settings",
    "StorageConfigurationError",
    "StorageError",
    "StorageUnavailableError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """``CeleryDispatcher`` lives in the Celery wing (``parallel_scheduler.celery.publish``); it
    loads on first use, so importing the core never imports Celery's integration."""
    if name == "CeleryDispatcher":
        from parallel_scheduler.celery.publish.send_task import CeleryDispatcher

        return CeleryDispatcher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
