"""parallel-scheduler: durable, parallel delayed job scheduling for Celery-style task queues."""

from __future__ import annotations

from storage_adapters import JobState

from .client import Client, ScheduleResult
from .delayed_scheduler import DelayedJobScheduler
from .dispatchers import CallableDispatcher, CeleryDispatcher, Dispatcher
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
