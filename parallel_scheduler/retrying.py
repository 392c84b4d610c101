"""Where transient failures are retried: bounded exponential backoff with jitter, each retry logged.

Storage calls are retried only on ``StorageUnavailableError``: what can heal by itself (a dropped
or refused connection, a timeout, a failover). A ``StorageConfigurationError`` (no such database,
refused credentials, unknown host, not an SQLite file) is raised at once, without WARNING lines:
waiting cannot fix it. Anything else is a bug or bad data and is raised at once too.

A hand-off to the worker system is retried a few times quickly; past that, the job goes back to
Scheduled and the pass backs off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    stop_after_delay,
    stop_before_delay,
    wait_random_exponential,
)

from storage_adapters import StorageUnavailableError

from .errors import LeaseLost

__all__ = ["call_dispatcher", "call_storage"]

T = TypeVar("T")
logger = logging.getLogger(__name__)


def call_storage(fn: Callable[[], T], *, give_up_after: float = 30.0) -> T:
    """``fn()``, retried while the storage server is unreachable, at most ``give_up_after`` s."""
    retrying = Retrying(
        retry=retry_if_exception_type(StorageUnavailableError),
        wait=wait_random_exponential(multiplier=0.05, max=2.0),
        # no sleep that would end past the budget: a caller waits at most give_up_after plus
        # one attempt (itself bounded by the storage connect timeout)
        stop=stop_after_delay(give_up_after) | stop_before_delay(give_up_after),
        before_sleep=before_sleep_log(logger, logging.WARNING),
        reraise=True,
    )
    return retrying(fn)


def call_dispatcher(fn: Callable[[], T], *, attempts: int = 3) -> T:
    """``fn()``, retried a few times quickly; the last error is raised for the caller to handle."""
    retrying = Retrying(
        retry=retry_if_not_exception_type(LeaseLost),  # stepping aside is not a failure
        wait=wait_random_exponential(multiplier=0.05, max=0.5),
        stop=stop_after_attempt(attempts),
        before_sleep=before_sleep_log(logger, logging.WARNING),
        reraise=True,
    )
    return retrying(fn)
