"""Which driver errors are permanent: the storage cannot work as configured, so retrying only
delays the error (with a WARNING line per attempt) that the user must fix anyway.

Retrying is for what heals by itself: a refused or reset connection (a server restarting), a
timeout, a failover. A database that does not exist, credentials the server refuses, a host name
that DNS does not know, or a file that is not an SQLite database stay that way until someone
changes the configuration, so each adapter raises ``StorageConfigurationError`` for them at once.

Drivers report most of these only as text (libpq reports connection failures without an
SQLSTATE), so the checks below read the messages of the servers' English locale, with the
SQLSTATE or error code first wherever the driver gives one. An error this module does not
recognise keeps its old treatment, so an unusual server message costs a bounded retry, never a
wrong "permanent".
"""

from __future__ import annotations

import os
import re
import socket

__all__ = ["dns_problem", "postgresql_problem", "sqlite_problem"]

# getaddrinfo codes that mean "this name does not resolve", as opposed to EAI_AGAIN ("the
# resolver could not answer now"), which can heal and stays retryable.
_NO_SUCH_HOST_CODES = frozenset(
    code
    for code in (
        getattr(socket, "EAI_NONAME", None),
        getattr(socket, "EAI_NODATA", None),
        getattr(socket, "EAI_FAIL", None),
    )
    if code is not None
)
_NO_SUCH_HOST_TEXT = re.compile(
    r"Name or service not known|nodename nor servname provided|"
    r"No address associated with hostname|Non-recoverable failure in name resolution|"
    r"(?:Unknown|No such) host",
    re.IGNORECASE,
)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (drivers wrap the socket error)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def dns_problem(exc: BaseException) -> str | None:
    """A problem text when DNS says the host name does not exist; ``None`` otherwise (EAI_AGAIN)."""
    for link in _chain(exc):
        if isinstance(link, socket.gaierror) and link.errno in _NO_SUCH_HOST_CODES:
            return "the host name does not resolve (DNS)"
        if _NO_SUCH_HOST_TEXT.search(str(link)):
            return "the host name does not resolve (DNS)"
    return None


# libpq and server messages, checked in order; the first match names the problem.
_POSTGRESQL_TEXT = (
    (re.compile(r'database "[^"]*" does not exist'), "the database does not exist"),
    (re.compile(r'role "[^"]*" does not exist'), "the user (role) does not exist"),
    (
        re.compile(r"authentication failed|no password supplied|password authentication"),
        "the server refused the credentials (authentication failed)",
    ),
    (re.compile(r"no pg_hba\.conf entry"), "the server refuses this user/database/host"),
    (re.compile(r"is not permitted to log in"), "the user may not log in"),
    (re.compile(r"permission denied for database"), "the user may not connect to the database"),
    (re.compile(r"SSL was required|does not support SSL"), "the server does not support SSL"),
)
# Class 28 (invalid authorisation) and 3D000 (no such database), when the driver has the code.
_POSTGRESQL_STATES = {"3D000": "the database does not exist"}


def postgresql_problem(message: str, sqlstate: str | None) -> str | None:
    """Why a PostgreSQL error is permanent, or ``None`` when it may heal."""
    if sqlstate is not None:
        if sqlstate in _POSTGRESQL_STATES:
            return _POSTGRESQL_STATES[sqlstate]
        if sqlstate.startswith("28"):
            return "the server refused the credentials (authentication failed)"
    for pattern, problem in _POSTGRESQL_TEXT:
        if pattern.search(message):
            return problem
    return None


_SQLITE_CANTOPEN = 14
_SQLITE_READONLY = 8
_SQLITE_NOTADB = 26
# READONLY's transient variants: another connection is recovering the WAL, or holds a lock.
_SQLITE_READONLY_TRANSIENT = frozenset({8 | (1 << 8), 8 | (2 << 8)})


def sqlite_problem(code: int | None, message: str, path: str | None) -> str | None:
    """Why an SQLite error is permanent, or ``None`` when it may heal (a lock, a full disk).

    "unable to open database file" is permanent only when the file cannot be there at all
    (its directory is missing, or the path is a directory); otherwise it may be a passing
    shortage (too many open files) and stays retryable.
    """
    primary = None if code is None else code & 0xFF
    if primary == _SQLITE_NOTADB or "file is not a database" in message:
        return "the file is not an SQLite database"
    if primary == _SQLITE_READONLY and code not in _SQLITE_READONLY_TRANSIENT:
        return "the database is read-only (file permissions or a read-only URL)"
    if primary == _SQLITE_CANTOPEN or "unable to open database file" in message:
        return _unopenable(path)
    return None


def _unopenable(path: str | None) -> str | None:
    if not path:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"the path {path!r} is a directory, not a database file"
    if not os.path.isdir(folder):
        return f"the directory {folder!r} does not exist"
    if not os.path.exists(path) and not os.access(folder, os.W_OK | os.X_OK):
        return f"the directory {folder!r} is not writable"
    return None
