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
    "UnsendableJobError",
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


class UnsendableJobError(DispatchError):
    """This one job cannot be sent, though others can: its message cannot be built (arguments
    that do not decode), or the broker refused or could not route it (no such exchange). The
    release backs off this job alone and sets it aside as ``failed`` after a bounded number of
    attempts, so it never holds back the jobs beside it. ``reason`` is said in words, for
    ``last_error``."""

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(f"job {job_id!r} cannot be sent: {reason}")
        self.job_id = job_id
        self.reason = reason
