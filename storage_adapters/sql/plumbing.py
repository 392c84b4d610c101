"""The plumbing under ``SQLStorage``: connections, transactions, driver errors as the contract's
errors, and the statement runners every family of the contract uses.

The engine runs in autocommit mode: nearly every operation is one statement, which the server
makes atomic on its own, so a ``BEGIN``/``COMMIT`` pair would only add two round trips. Explicit
transactions are opened only where several statements must be all-or-nothing (a large
``add_jobs``, settling claims of several tokens, firing a recurring job, schema set-up), with the
dialect's own ``BEGIN`` (``BEGIN IMMEDIATE`` on SQLite, so writers queue on the busy timeout
instead of failing later when a read lock cannot be upgraded).

The statements every job runs skip SQLAlchemy's execution layer (``_driver_rows``, on the road
``sql/driver.py`` describes). Errors take the same road as everywhere else: a lost connection is
invalidated in the pool, and the driver error becomes the contract's error through ``_translate``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError

from storage_adapters.errors import StorageConfigurationError, StorageError, StorageUnavailableError
from storage_adapters.records import LockLease, NewJob, validate_prefix
from storage_adapters.sql.dialect import Dialect
from storage_adapters.sql.driver import (
    ArrayInsert,
    BinaryArrays,
    DriverStatement,
    HeldConnections,
    ValuesInsert,
)
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.statements import Statements
from storage_adapters.sql.tables import build_tables

__all__ = ["ADD_JOBS_PAGE_SIZE", "VACUUM_AFTER", "RollBack", "SQLPlumbing"]

ADD_JOBS_PAGE_SIZE = 1000  # new jobs per INSERT statement
#: The fewest jobs a pause, a resume or a pass's deferrals move for the dialect's clean-up to run.
VACUUM_AFTER = 10_000
logger = logging.getLogger(__name__)
_UNDEFINED_TABLE = "42P01"


class RollBack(Exception):
    """Raised inside ``_transaction`` to end it with ``ROLLBACK``: its first write was refused."""


_PlumbingT = TypeVar("_PlumbingT", bound="SQLPlumbing")


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
        self._driver_statements: dict[int, DriverStatement] = {}
        self._array_insert_statement: ArrayInsert | None = None
        self._values_insert_statement: ValuesInsert | None = None
        #: the array statements of the recurring family, compiled, by ``id`` of their statement
        self._array_statements: dict[int, tuple[sa.ClauseElement, BinaryArrays]] = {}
        self._held = HeldConnections(engine)
        self._closed = False
        #: False for a ``sibling``: its engine (and kept connections) belong to the original.
        self._owns_engine = True
        #: The shard count ``setup()`` expects to find recorded (see sharding.py); a
        #: ``ShardedStorage`` sets it on its first shard before setting it up.
        self.expected_shards = 1

    def sibling(self: _PlumbingT, prefix: str) -> _PlumbingT:
        """Another prefix's tables in the same database, on this storage's engine and kept
        connections (a shard of a sharded store: one pool for all shards, not one each).
        Closing the sibling leaves the engine open; closing this storage closes it."""
        twin = copy.copy(self)
        twin._prefix = validate_prefix(prefix)
        twin._tables = build_tables(prefix)
        twin._sql = Statements(twin._tables, self._dialect)
        twin._driver_statements = {}
        twin._array_insert_statement = None
        twin._values_insert_statement = None
        twin._array_statements = {}
        twin._closed = False
        twin._owns_engine = False
        twin.expected_shards = 1
        return twin

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
            raise self._no_free_connection(exc) from exc

    def _no_free_connection(self, exc: sa.exc.TimeoutError) -> StorageUnavailableError:
        return StorageUnavailableError(
            f"no free connection to {self._dialect.label} at {self._masked_url}: {exc}"
        )

    def _driver_rows(self, statement: sa.ClauseElement, params: Mapping[str, Any]) -> list[Any]:
        """``_rows`` for the per-job hot statements (each with ``RETURNING``: the release
        path's claim and mark, a single-job accept), without
        SQLAlchemy's execution layer (see the module's docstring): plain tuples, in the
        statement's column order.

        Each thread keeps one pooled connection and its cursor for these statements, up to the
        pool's size (``HeldConnections``), so a job costs no pool check-out and return. The
        engine is in autocommit mode, so every statement commits by itself and nothing stays
        open between jobs; a statement that fails gives its connection back to the pool
        (invalidated when it was lost), so the thread's next job starts on a fresh one.
        """
        prepared = self._prepared(statement)
        with self._held_cursor(prepared.sql) as cursor:
            cursor.execute(prepared.sql, prepared.parameters(params))
            return list(cursor.fetchall())

    def _prepared(self, statement: sa.ClauseElement) -> DriverStatement:
        """``statement`` compiled once for the driver (see ``DriverStatement``)."""
        prepared = self._driver_statements.get(id(statement))
        if prepared is None:
            prepared = DriverStatement(statement, self._engine.dialect)
            self._driver_statements[id(statement)] = prepared
        return prepared

    @contextmanager
    def _held_cursor(self, what: str) -> Iterator[Any]:
        """The calling thread's kept DBAPI cursor (``HeldConnections``), for statements run on
        the driver: a driver error leaves as the contract's error (``what`` names the work in
        it), and gives the connection back to the pool (invalidated when it was lost), so the
        thread's next call starts on a fresh one; any other error gives it back too."""
        if self._closed:
            raise StorageError(f"{self!r} is closed")
        try:
            kept = self._held.get()
        except DBAPIError as exc:
            raise self._translate(exc) from exc
        except sa.exc.TimeoutError as exc:
            raise self._no_free_connection(exc) from exc
        dialect = self._engine.dialect
        try:
            yield kept.cursor
        except dialect.loaded_dbapi.Error as orig:
            lost = dialect.is_disconnect(orig, kept.pooled.dbapi_connection, kept.cursor)
            self._held.done(kept, failed=True, lost=orig if lost else None)
            wrapped = DBAPIError.instance(  # a DBAPIError, as ``orig`` is a driver error
                what,
                None,
                orig,
                dialect.loaded_dbapi.Error,
                hide_parameters=True,
                connection_invalidated=lost,
                dialect=dialect,
            )
            assert isinstance(wrapped, DBAPIError)
            raise self._translate(wrapped) from orig
        except BaseException:
            self._held.done(kept, failed=True)
            raise
        self._held.done(kept)

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
        detail = " ".join(detail.split())  # libpq words a failed connection over two lines
        where = f"{self._dialect.label} at {self._masked_url}"
        problem = self._configuration_problem(exc)
        if problem is not None:  # checked first: these arrive as connection errors too
            return StorageConfigurationError(f"{where} cannot be used: {problem} ({detail})")
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

    @rerun_if_ended_idle
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
            page = jobs[start : start + size]
            if self._dialect.new_jobs_as_arrays:
                arrays = self._array_insert()
                result = conn.exec_driver_sql(arrays.sql, arrays.parameters(page))
            else:
                values = self._values_insert()
                result = conn.exec_driver_sql(values.sql(len(page)), values.parameters(page))
            stored.update(result.scalars().all())
        return [job.id in stored for job in jobs]

    def _array_insert(self) -> ArrayInsert:
        """``Statements.add_jobs`` as the driver runs it, compiled on first use (per prefix)."""
        if self._array_insert_statement is None:
            self._array_insert_statement = ArrayInsert(self._sql.add_jobs, self._engine.dialect)
        return self._array_insert_statement

    def _values_insert(self) -> ValuesInsert:
        """``Statements.add_jobs`` on SQLite as the driver runs it, compiled on first use."""
        if self._values_insert_statement is None:
            self._values_insert_statement = ValuesInsert(self._sql.add_jobs, self._engine.dialect)
        return self._values_insert_statement

    def _lease_params(self, lock: LockLease) -> dict[str, Any]:
        """The fence of a write made under ``lock`` (lock calls and recurring firings send it)."""
        return {"lock_name": lock.name, "lock_owner": lock.owner, "lock_token": lock.token}

    def _after_moving(self, moved: int) -> None:
        """After a pause, a resume or a pass's deferrals that moved at least ``VACUUM_AFTER``
        jobs, the dialect's clean-up (PostgreSQL: ``VACUUM`` the jobs table, so the due index
        sheds the moved jobs' old entries, which every claim would walk first until autovacuum
        ran). Best effort: the move is committed already, so a failure is logged, never
        raised."""
        command = self._dialect.after_mass_move
        if not command or moved < VACUUM_AFTER:
            return
        try:
            with self._connection() as conn:  # the engine autocommits: VACUUM runs on its own
                conn.exec_driver_sql(command.format(jobs=self._tables.jobs.name))
        except StorageError as exc:
            logger.warning("could not vacuum %s after moving %d jobs: %s", self, moved, exc)
