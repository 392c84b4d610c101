"""The storage leaf's errors, rooted in the project's one exception tree.

``ParallelSchedulerError`` lives here, in the leaf, so that storage errors can derive from it
without the leaf importing the core; ``parallel_scheduler`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "InvalidRecordError",
    "ParallelSchedulerError",
    "RecordExistsError",
    "RecordNotFoundError",
    "StorageConfigurationError",
    "StorageError",
    "StorageUnavailableError",
    "one_line",
    "refused_save",
]


def one_line(text: str) -> str:
    """``text`` with every control character (a newline, a tab, a NUL, an escape sequence, a
    lone surrogate) written as its Python escape, so that a message echoing input, or a driver's
    own text, stays one line and cannot paint the terminal; printable text is left as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ParallelSchedulerError(Exception):
    """The root of the project's one exception tree.

    It lives in the storage leaf so that storage errors can derive from it without the leaf
    importing the core; ``parallel_scheduler`` re-exports it, and every error the project raises
    on purpose derives from it, so a caller (or the CLI) catches everything of ours with one
    ``except``.
    """


class StorageError(ParallelSchedulerError):
    """Base of every error an adapter raises on purpose."""


class StorageUnavailableError(StorageError):
    """The storage server could not be reached or dropped the connection; safe to retry."""


class StorageConfigurationError(StorageError):
    """The storage cannot work as configured: the database does not exist, the server refused
    the credentials, the host name does not resolve, the file is not an SQLite database.

    Never retried (unlike ``StorageUnavailableError``): waiting cannot fix it, so it is raised at
    once, naming the problem and the storage URL (password masked).
    """


class InvalidIdentifierError(StorageError, ValueError):
    """A prefix, lock name or job id that is unsafe to put into SQL or a Redis key."""


class InvalidArgumentError(StorageError, ValueError):
    """An argument to an adapter is out of range: a limit, an offset, a save mode, a flag, a pool
    size, a number of seconds. Nothing was written.

    It is a ``ValueError`` too, so a caller that already catches ``ValueError`` keeps working.
    """


class InvalidRecordError(InvalidArgumentError):
    """A job or recurring record to write breaks the contract (a duplicate id in one call, a task
    name out of bounds, a payload that is not a str, a time that is not a finite number). The
    whole call was refused: nothing of it was written."""


class RecordNotFoundError(StorageError, KeyError):
    """The record a call must change does not exist (``save_recurring(..., "update")``).

    It is a ``KeyError`` too, so a caller that already catches ``KeyError`` keeps working.
    """


class RecordExistsError(StorageError, KeyError):
    """The record a call must create exists already (``save_recurring(..., "create")``).

    It is a ``KeyError`` too, so a caller that already catches ``KeyError`` keeps working.
    """


def refused_save(mode: str, ids: Sequence[str]) -> RecordExistsError | RecordNotFoundError:
    """The error of a recurring save its mode refused (``create``: ``ids`` exist; ``update``:
    they do not), naming the first few."""
    shown = ", ".join(repr(rid) for rid in ids[:5]) + (
        f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    )
    noun = "recurring job" if len(ids) == 1 else "recurring jobs"
    if mode == "create":
        verb = "already exists" if len(ids) == 1 else "already exist"
        return RecordExistsError(f"{noun} {shown} {verb}")
    verb = "does not exist" if len(ids) == 1 else "do not exist"
    return RecordNotFoundError(f"{noun} {shown} {verb}")
