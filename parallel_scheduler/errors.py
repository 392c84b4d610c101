"""One exception tree, so callers can catch everything of ours with one ``except``."""

from __future__ import annotations

from storage_adapters import (
    MissingExtraError,
    ParallelSchedulerError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)

__all__ = [
    "ConfigurationError",
    "DispatchError",
    "InvalidJobError",
    "LeaseLost",
    "MissingExtraError",
    "ParallelSchedulerError",
    "StorageConfigurationError",
    "StorageError",
    "StorageUnavailableError",
]


class ConfigurationError(ParallelSchedulerError, ValueError):
    """A setting is missing, malformed or out of range; the message names the setting."""


class InvalidJobError(ParallelSchedulerError, ValueError):
    """A job that cannot be stored as given; nothing was written."""


class DispatchError(ParallelSchedulerError):
    """The worker system did not take a job; the job stays scheduled and is tried again."""


class LeaseLost(DispatchError):
    """The scheduler's lock lease ran out part-way through a batch: the rest is not sent, so a
    holder that stalled cannot keep sending jobs another scheduler may already have taken."""
