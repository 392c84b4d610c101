"""SQLite adapter: the shared SQL storage in one local file, for a single host.

SQLite allows one writer at a time, which is what makes its claims safe without ``SKIP LOCKED``:
the claim's ``UPDATE … WHERE state = 'scheduled'`` runs under the write lock, so a second claimer
sees the job already claimed. Each connection uses WAL (readers never block the writer), a busy
timeout (writers from other threads and processes queue instead of failing at once) and
``BEGIN IMMEDIATE`` for multi-statement writes (the write lock is taken up front, because a
deferred transaction that later needs it fails with "database is locked" without waiting).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from storage_adapters.permanent import sqlite_problem
from storage_adapters.sql.dialect import Dialect
from storage_adapters.sql.storage import ADD_JOBS_PAGE_SIZE, SQLStorage
from storage_adapters.urls import InvalidStorageURLError, mask_url

__all__ = ["SQLiteStorage"]

BUSY_TIMEOUT_SECONDS = 30.0
# Primary result codes that mean "try again later", not "this statement is wrong": BUSY, LOCKED,
# IOERR, FULL, CANTOPEN, PROTOCOL. Python < 3.11 has no error codes, only the message to go by.
_TRANSIENT_CODES = frozenset({5, 6, 10, 13, 14, 15})
_TRANSIENT_MESSAGES = (
    "database is locked",
    "database table is locked",
    "unable to open database file",
    "disk i/o error",
    "database or disk is full",
)


def _ids_in(column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    ids = sa.func.json_each(sa.bindparam("ids", type_=sa.String)).table_valued("value")
    return column.in_(sa.select(ids.c.value))


def _bind_ids(ids: Sequence[str]) -> object:
    return json.dumps(list(ids))


def _is_unavailable(exc: DBAPIError) -> bool:
    """SQLite reports "no such table" and "database is locked" with one exception class."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _TRANSIENT_CODES
    return any(message in str(exc.orig).lower() for message in _TRANSIENT_MESSAGES)


def _serialise_schema_changes(conn: Connection, prefix: str) -> None:
    """Nothing to add: the set-up transaction's ``BEGIN IMMEDIATE`` already holds the write lock."""


def _configure(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        _enable_wal(cursor)
        # A build may default WAL to NORMAL, which can lose the last commits on power loss.
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _enable_wal(cursor: Any) -> None:
    """Switch the file to WAL, waiting (up to the busy timeout) for other connections' locks.

    SQLite does not call its busy handler for this switch: on a brand-new file that several
    processes open at once (every scheduler's first ``setup``), the connections racing to switch
    it, or one holding its set-up transaction, answer "database is locked" at once. Once the file
    is in WAL (it stays so), the statement returns immediately.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


# julianday('now') is fixed for the whole statement and read once the statement holds its lock,
# so a write that queued on the busy timeout still acts on the time it ran. Millisecond precision.
SQLITE = Dialect(
    name="sqlite",
    label="SQLite",
    now=sa.literal_column("((julianday('now') - 2440587.5) * 86400.0)", sa.Double),
    begin="BEGIN IMMEDIATE",
    new_jobs_as_arrays=False,
    insert=sqlite.insert,
    ids_in=_ids_in,
    bind_ids=_bind_ids,
    is_unavailable=_is_unavailable,
    serialise_schema_changes=_serialise_schema_changes,
)


def _check_file_url(url: str) -> None:
    """Refuse in-memory databases: each pooled connection would get its own empty one."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidStorageURLError(f"malformed SQLite URL {mask_url(url)!r}") from None
    if parsed.get_backend_name() != "sqlite":
        raise InvalidStorageURLError(f"not an SQLite URL: {mask_url(url)!r}")
    if parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory":
        raise InvalidStorageURLError(
            f"SQLite URL {mask_url(url)!r} names no file; use sqlite:///relative/path.db "
            "or sqlite:////absolute/path.db (in-memory databases are not shared between "
            "connections)"
        )


class SQLiteStorage(SQLStorage):
    """The ``Storage`` contract in a local SQLite file (``sqlite:///path``), safe for many
    threads and processes on one host."""

    def __init__(self, url: str, *, prefix: str = "ps") -> None:
        _check_file_url(url)
        engine = sa.create_engine(
            url,
            isolation_level="AUTOCOMMIT",
            # an INSERT … RETURNING of many rows (a chunk of saved recurring jobs) is one statement
            insertmanyvalues_page_size=ADD_JOBS_PAGE_SIZE,
            hide_parameters=True,
            connect_args={"timeout": BUSY_TIMEOUT_SECONDS},
        )
        sa.event.listen(engine, "connect", _configure)
        super().__init__(engine, SQLITE, prefix=prefix, masked_url=mask_url(url), secret=None)

    def _configuration_problem(self, exc: DBAPIError) -> str | None:
        """Not a database, read-only, or a path where no file can be: no retry can fix those."""
        code = getattr(exc.orig, "sqlite_errorcode", None)
        path = self._engine.url.database
        return sqlite_problem(code if isinstance(code, int) else None, str(exc.orig), path)
