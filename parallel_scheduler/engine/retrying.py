"""Where transient failures are retried: bounded exponential backoff with jitter, each retry logged.

Storage calls are retried only on ``StorageUnavailableError``: what can heal by itself (a dropped
or refused connection, a timeout, a failover). A ``StorageConfigurationError`` (no such database,
refused credentials, unknown host, not an SQLite file) is raised at once, without WARNING lines:
waiting cannot fix it. Anything else is a bug or bad data and is raised at once too.

A storage call runs bare first: the tenacity policy (a ``Retrying`` with its strategies and call
state, more CPU than a one-row insert's own Python work) is built only once that first attempt
failed with ``StorageUnavailableError``, and the failure is handed to it as its first attempt,
so attempts, back-off, WARNING lines and the budget are those of a policy that ran from the start.

A hand-off to the worker system runs bare first the same way and is retried a few times
quickly; past that, the job goes back to Scheduled and the pass backs off.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    stop_after_delay,
    stop_before_delay,
    wait_random_exponential,
)

from parallel_scheduler.errors import LeaseLost
from storage_adapters import StorageUnavailableError

__all__ = ["call_dispatcher", "call_storage"]

T = TypeVar("T")
logger = logging.getLogger(__name__)


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    """A before-sleep hook whose WARNING says in words what failed, why and when it is retried,
    e.g. ``sending to the broker failed (ConnectionRefusedError: ...); retrying in 0.5 s``:
    never the name of the function retried (tenacity's default prints private names)."""

    def log(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "no error"
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "%s failed (%s); retrying in %.1f s (attempt %d)",
            what,
            reason,
            delay,
            state.attempt_number + 1,
        )

    return log


def call_storage(fn: Callable[[], T], *, give_up_after: float = 30.0) -> T:
    """``fn()``, retried while the storage server is unreachable, at most ``give_up_after`` s
    from the start of the first attempt (which runs bare; see the module's docstring)."""
    started = time.monotonic()
    try:
        return fn()
    except StorageUnavailableError as exc:
        first = exc
    spent = time.monotonic() - started
    return _storage_policy(give_up_after - spent)(_replaying(first, fn))


def _replaying(first: BaseException, fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` for a retry policy whose first attempt already ran bare and raised ``first``:
    the policy's first call raises it again, so attempts, WARNING lines and budget are those of
    a policy that ran from the start; the WARNING lines name ``fn``."""
    pending: BaseException | None = first

    @functools.wraps(fn)
    def attempt() -> T:
        nonlocal pending
        if pending is not None:
            failed, pending = pending, None
            raise failed
        return fn()

    return attempt


def _storage_policy(budget: float) -> Retrying:
    """Retries of ``StorageUnavailableError`` for ``budget`` more seconds from now."""
    return Retrying(
        retry=retry_if_exception_type(StorageUnavailableError),
        wait=wait_random_exponential(multiplier=0.05, max=2.0),
        # no sleep that would end past the budget: a caller waits at most give_up_after plus
        # one attempt (itself bounded by the storage connect timeout)
        stop=stop_after_delay(budget) | stop_before_delay(budget),
        before_sleep=_log_retry("a call to the storage server"),
        reraise=True,
    )


def call_dispatcher(
    fn: Callable[[], T], *, attempts: int = 3, what: str = "sending jobs to the broker"
) -> T:
    """``fn()``, retried a few times quickly; the last error is raised for the caller to handle.
    The first attempt runs bare, like a storage call's (see the module's docstring); each retry's
    WARNING starts with ``what`` (e.g. ``sending 250 job(s) to the broker``)."""
    try:
        return fn()
    except LeaseLost:
        raise  # stepping aside is not a failure
    except Exception as exc:
        if attempts <= 1:
            raise
        first = exc
    retrying = Retrying(
        retry=retry_if_not_exception_type(LeaseLost),
        wait=wait_random_exponential(multiplier=0.05, max=0.5),
        stop=stop_after_attempt(attempts),
        before_sleep=_log_retry(what),
        reraise=True,
    )
    return retrying(_replaying(first, fn))
