"""One exception tree, so callers can catch everything of ours with one ``except``."""

from __future__ import annotations

from collections.abc import Iterable

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


class InvalidItemError(InvalidJobError):
    """One item of a bulk call (``recurring.save_many``) is invalid; nothing was written.
    ``position`` is the item's place in the input, counting from 1."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


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
    ``last_error``.

    ``taken_after``: raised as the cause of ``BatchDispatchError(sent, ...)``, the ids of jobs
    after this one in the batch that the worker system took all the same (a broker that
    refused one message of a pipelined batch and kept the later ones); the release counts them
    as sent and does not send them again. Empty (the default) means no job after this one is
    known to be sent: all of them are sent again, so name only jobs known to be taken (a job
    left out may run twice; one named but not taken is lost).
    """

    def __init__(self, job_id: str, reason: str, taken_after: Iterable[str] = ()) -> None:
        super().__init__(f"job {job_id!r} cannot be sent: {reason}")
        self.job_id = job_id
        self.reason = reason
        self.taken_after = frozenset(taken_after)
