"""A transaction the server ended because its client sat idle in it runs once more.

PostgreSQL ends a session left idle inside a transaction for longer than
``idle_in_transaction_session_timeout`` (2 s, see ``postgresql.py``), so that a stalled client
cannot keep rows locked. Ending it rolls the whole transaction back, and the statement that found
the session gone never ran, so running the transaction again on a fresh connection does exactly
what the caller asked for, once. Without this, a process that stalls for a couple of seconds (a
loaded machine, a long garbage collection) fails a pause, a dashboard page or a save as
"unavailable" although the server is up. Only a method whose one transaction is all it writes may
carry the decorator; a method that commits in steps would repeat the steps already committed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from storage_adapters.errors import StorageUnavailableError

__all__ = ["ended_idle_in_transaction", "rerun_if_ended_idle"]

#: PostgreSQL's SQLSTATE for a session ended by ``idle_in_transaction_session_timeout``.
IDLE_IN_TRANSACTION_TIMEOUT = "25P03"

P = ParamSpec("P")
R = TypeVar("R")
logger = logging.getLogger(__name__)


def ended_idle_in_transaction(exc: BaseException) -> bool:
    """Whether ``exc`` (a contract error raised from a driver error) says the server ended the
    session because it sat idle in a transaction."""
    cause = exc.__cause__
    driver_error = getattr(cause, "orig", cause)  # SQLAlchemy's wrapper, or the driver's own
    return getattr(driver_error, "sqlstate", None) == IDLE_IN_TRANSACTION_TIMEOUT


def rerun_if_ended_idle(method: Callable[P, R]) -> Callable[P, R]:
    """``method``, run once more when its transaction was ended for idling (see above)."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except StorageUnavailableError as exc:
            if not ended_idle_in_transaction(exc):
                raise
            logger.warning(
                "%s: the server ended its transaction, left idle too long while this process "
                "stalled, and rolled it back; running it again",
                method.__name__,
            )
        return method(*args, **kwargs)

    return run
