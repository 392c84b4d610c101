"""The plumbing under ``SQLStorage``: connections, transactions, driver errors as the contract's
errors, and the statement runners every family of the contract uses.

The engine runs in autocommit mode: nearly every operation is one statement, which the server
makes atomic on its own, so a ``BEGIN``/``COMMIT`` pair would only add two round trips. Explicit
transactions are opened only where several statements must be all-or-nothing (a large
``add_jobs``, settling claims of several tokens, firing a recurring job, schema set-up), with the
dialect's own ``BEGIN`` (``BEGIN IMMEDIATE`` on SQLite, so writers queue on the busy timeout
instead of failing later when a read lock cannot be upgraded).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError

from .errors import StorageConfigurationError, StorageError, StorageUnavailableError
from .records import LockLease, NewJob, validate_prefix
from .sql_statements import NEW_JOB_FIELDS, Dialect, Statements
from .sql_tables import build_tables

__all__ = ["ADD_JOBS_PAGE_SIZE", "RollBack", "SQLPlumbing"]

ADD_JOBS_PAGE_SIZE = 1000  # new jobs per INSERT statement
_UNDEFINED_TABLE = "42P01"


class RollBack(Exception):
    """Raised inside ``_transaction`` to end it with ``ROLLBACK``: its first write was refused."""


class SQLPlumbing:
    """One prefix's tables in an SQL database reached through ``engine``, and the ways to run a
    statement on them; ``SQLStorage`` builds the contract on it."""

    def __init__(
        self, engine: Engine, dialect: Dialect, *, prefix: str, masked_url: str, secret: str | None
    ) -> None:
        self._prefix = validate_prefix(prefix)
        self._engine = engine
        self._dialect = dialect
        self._masked_url = masked_url
        self._secret = secret
        self._tables = build_tables(prefix)
        self._sql = Statements(self._tables, dialect)
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._masked_url!r}, prefix={self._prefix!r})"

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A pooled connection; driver errors leave as the contract's errors."""
        if self._closed:
            raise StorageError(f"{self!r} is closed")
        try:
            with self._engine.connect() as conn:
                yield conn
        except DBAPIError as exc:
            raise self._translate(exc) from exc
        except sa.exc.TimeoutError as exc:
            raise StorageUnavailableError(
                f"no free connection to {self._dialect.label} at {self._masked_url}: {exc}"
            ) from exc

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """All or nothing. On an error, closing the connection rolls back at the driver level;
        ``RollBack`` rolls back at once and is not raised further."""
        with self._connection() as conn:
            conn.exec_driver_sql(self._dialect.begin)
            try:
                yield conn
            except RollBack:
                conn.exec_driver_sql("ROLLBACK")
                return
            conn.exec_driver_sql("COMMIT")

    def _translate(self, exc: DBAPIError) -> StorageError:
        detail = f"{type(exc.orig).__name__}: {exc.orig}"
        if self._secret:
            detail = detail.replace(self._secret, "***")
        where = f"{self._dialect.label} at {self._masked_url}"
        problem = self._configuration_problem(exc)
        if problem is not None:  # checked first: these arrive as connection errors too
            return StorageConfigurationError(
                f"{where} cannot be used: {problem} ({' '.join(detail.split())})"
            )
        if exc.connection_invalidated or self._dialect.is_unavailable(exc):
            return StorageUnavailableError(f"{where} is unavailable: {detail}")
        if getattr(exc.orig, "sqlstate", None) == _UNDEFINED_TABLE or "no such table" in detail:
            detail += f" (has setup() been run for prefix {self._prefix!r}?)"
        return StorageError(f"{where} failed: {detail}")

    def _configuration_problem(self, exc: DBAPIError) -> str | None:
        """Why ``exc`` cannot heal by retrying (see ``permanent.py``), or ``None``; per dialect."""
        return None

    def _rows(self, statement: sa.Executable, params: Mapping[str, Any]) -> list[Row[Any]]:
        with self._connection() as conn:
            return list(conn.execute(statement, params).all())

    def _due_rows(self, statement: sa.Executable, params: Mapping[str, Any]) -> list[Row[Any]]:
        """``_rows`` for the reads of the due set, under the dialect's ``due_scan_settings``:
        three round trips (the settings travel with BEGIN), and closing the connection on an
        error rolls the transaction back, as in ``_transaction``."""
        if not self._dialect.due_scan_settings:
            return self._rows(statement, params)
        with self._connection() as conn:
            conn.exec_driver_sql(f"{self._dialect.begin}; {self._dialect.due_scan_settings}")
            rows = list(conn.execute(statement, params).all())
            conn.exec_driver_sql("COMMIT")
            return rows

    def _scalar(self, statement: sa.Executable, params: Mapping[str, Any] | None = None) -> Any:
        with self._connection() as conn:
            return conn.execute(statement, params).scalar()

    def _changed(self, statement: sa.Executable, params: Mapping[str, Any]) -> int:
        with self._connection() as conn:
            return int(conn.execute(statement, params).rowcount)

    def _insert_jobs(self, conn: Connection, jobs: Sequence[NewJob]) -> list[bool]:
        """Insert checked ``jobs`` page by page on ``conn``; per job, whether it was new."""
        size = ADD_JOBS_PAGE_SIZE
        stored: set[str] = set()
        for start in range(0, len(jobs), size):
            params = self._new_job_params(jobs[start : start + size])
            stored.update(conn.execute(self._sql.add_jobs, params).scalars())
        return [job.id in stored for job in jobs]

    def _new_job_params(self, page: Sequence[NewJob]) -> Any:
        """A dict of columns as arrays, or a list of rows; see ``Statements._add_jobs``."""
        rows = [(job.id, job.task, job.payload, float(job.due_at), job.envelope) for job in page]
        if self._dialect.new_jobs_as_arrays:
            return {f"{name}s": [row[i] for row in rows] for i, name in enumerate(NEW_JOB_FIELDS)}
        return [dict(zip(NEW_JOB_FIELDS, row, strict=True)) for row in rows]

    def _lease_params(self, lock: LockLease) -> dict[str, Any]:
        """The fence of a write made under ``lock`` (lock calls and recurring firings send it)."""
        return {"lock_name": lock.name, "lock_owner": lock.owner, "lock_token": lock.token}
