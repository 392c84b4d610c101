"""parallel-scheduler: durable, parallel delayed job scheduling for Celery-style task queues."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage_adapters import JobState

from .client import Client, ScheduleResult
from .delayed_scheduler import DelayedJobScheduler
from .dispatchers import CallableDispatcher, Dispatcher
from .errors import (
    ConfigurationError,
    DispatchError,
    InvalidJobError,
    MissingExtraError,
    ParallelSchedulerError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from .jobs import Job, JobSpec
from .settings import Settings
from .stats import Outcome, PassStats

if TYPE_CHECKING:
    from .celery.publish.send_task import CeleryDispatcher

__version__ = "0.1.0"

__all__ = [
    "CallableDispatcher",
    "CeleryDispatcher",
    "Client",
    "ConfigurationError",
    "DelayedJobScheduler",
    "DispatchError",
    "Dispatcher",
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
        from .celery.publish.send_task import CeleryDispatcher

        return CeleryDispatcher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
