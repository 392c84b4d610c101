"""The plumbing under ``SQLStorage``: connections, transactions, driver errors as the contract's
errors, and the statement runners every family of the contract uses.

The engine runs in autocommit mode: nearly every operation is one statement, which the server
makes atomic on its own, so a ``BEGIN``/``COMMIT`` pair would only add two round trips. Explicit
transactions are opened only where several statements must be all-or-nothing (a large
``add_jobs``, settling claims of several tokens, firing a recurring job, schema set-up), with the
dialect's own ``BEGIN`` (``BEGIN IMMEDIATE`` on SQLite, so writers queue on the busy timeout
instead of failing later when a read lock cannot be upgraded).

The two statements every job of the per-job release path runs (its claim, and the mark that ends
it) skip SQLAlchemy's execution layer: ``_driver_rows`` runs them, compiled once
(``DriverStatement``), on a DBAPI connection and cursor each thread keeps for them. On that path
the scheduler is bound by Python CPU per job under one GIL, and SQLAlchemy's per-execution work
(execution context, result and row objects, a ``Connection`` around a pool check-out and return)
was about a third of it. A client storing one job per call takes the same road for its insert
(``Statements.add_job``): there the bulk statement (SQLAlchemy's execution layer, and five arrays
of one element each to dump and unnest) cost about half of the call's CPU. Errors take the same
road as everywhere else: a lost connection is invalidated in the pool, and the driver error
becomes the contract's error through ``_translate``.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection, QueuePool
from sqlalchemy.sql.compiler import SQLCompiler

from storage_adapters.errors import StorageConfigurationError, StorageError, StorageUnavailableError
from storage_adapters.records import LockLease, NewJob, validate_prefix
from storage_adapters.sql.statements import NEW_JOB_FIELDS, Dialect, Statements
from storage_adapters.sql.tables import build_tables

__all__ = ["ADD_JOBS_PAGE_SIZE", "ArrayInsert", "DriverStatement", "RollBack", "SQLPlumbing"]

ADD_JOBS_PAGE_SIZE = 1000  # new jobs per INSERT statement
_UNDEFINED_TABLE = "42P01"


class RollBack(Exception):
    """Raised inside ``_transaction`` to end it with ``ROLLBACK``: its first write was refused."""


class DriverStatement:
    """A Core statement compiled once for a dialect, to run on a DBAPI cursor as it is.

    What SQLAlchemy would do per execution is done here once or in a few lines: the SQL text, the
    parameter order (positional paramstyles such as SQLite's ``?``), the constant parameters
    the compiler extracted (``attempts + 1``), and the per-type conversion of bound values (the
    dialect's bind processors, such as SQLite's float conversion or PostgreSQL's array one).
    """

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a Core statement compiles to SQL
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("a statement rendered per execution cannot be compiled once")
        self.sql = compiled.string
        # every parameter with its compiled value: constants, and None for those callers give
        self._defaults: dict[str, Any] = dict(compiled.construct_params(_check=False))
        self._processors: dict[str, Callable[[Any], Any]] = {}
        for name, process in compiled._bind_processors.items():
            if not callable(process):  # one per element: a tuple-valued parameter
                raise ValueError(f"parameter {name!r} is rendered per execution")
            self._processors[name] = process
        self._order = tuple(compiled.positiontup or ()) if compiled.positional else None

    @property
    def positional(self) -> bool:
        """Whether the driver takes the parameters as a tuple (``?``), not by name."""
        return self._order is not None

    @property
    def defaults(self) -> Mapping[str, Any]:
        """Every parameter with its compiled value: constants, ``None`` for those callers give."""
        return self._defaults

    def parameters(self, given: Mapping[str, Any]) -> Mapping[str, Any] | tuple[Any, ...]:
        values = {**self._defaults, **given}
        for name, process in self._processors.items():
            if name in values:
                values[name] = process(values[name])
        if self._order is None:
            return values
        return tuple(values.get(name) for name in self._order)


class ArrayInsert:
    """``Statements.add_jobs`` on PostgreSQL as the driver runs it: one array per column of
    ``NEW_JOB_FIELDS``, each sent in the driver's binary format (``%(name)b``).

    psycopg's text format for an array quotes and escapes every element with a regular
    expression (and a JSON payload is full of quotes): for a page of 1,000 jobs that was about
    two thirds of the CPU a bulk accept cost the caller. The binary format writes each element as
    its length and its UTF-8 bytes. The arrays skip SQLAlchemy's bind processors (they only copy
    each list): ``parameters`` builds plain lists of ``str``, ``float`` and ``None``.
    """

    ARRAYS = tuple(f"{name}s" for name in NEW_JOB_FIELDS)

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect) -> None:
        compiled = DriverStatement(statement, dialect)
        if compiled.positional:
            raise ValueError("the arrays are named parameters (psycopg's pyformat)")
        sql = compiled.sql
        for name in self.ARRAYS:
            placeholder = f"%({name})s"
            if sql.count(placeholder) != 1:
                raise ValueError(f"parameter {name!r} is not in the statement once")
            sql = sql.replace(placeholder, f"%({name})b")
        self.sql = sql
        #: what the statement binds besides the arrays (the new job's attempts, 0)
        self._constants = {
            name: value for name, value in compiled.defaults.items() if name not in self.ARRAYS
        }

    def parameters(self, page: Sequence[NewJob]) -> dict[str, Any]:
        """The parameters that insert ``page``, checked new jobs."""
        ids, tasks, payloads, due_ats, envelopes = self.ARRAYS
        return {
            **self._constants,
            ids: [job.id for job in page],
            tasks: [job.task for job in page],
            payloads: [job.payload for job in page],
            due_ats: [float(job.due_at) for job in page],  # one element type per array
            envelopes: [job.envelope for job in page],
        }


class _Kept:
    """A connection and cursor for ``_driver_rows``: kept by its thread, or ``one_shot`` (given
    back after the call). A kept one's thread-local copy goes when its thread ends, and a
    finalizer then gives the connection back to the pool."""

    __slots__ = ("__weakref__", "cursor", "one_shot", "pooled")

    def __init__(self, pooled: PoolProxiedConnection, cursor: Any, one_shot: bool) -> None:
        self.pooled = pooled
        self.cursor = cursor
        self.one_shot = one_shot


class _HeldConnections:
    """Pooled DBAPI connections and cursors kept by threads between calls of
    ``SQLPlumbing._driver_rows``: at most the pool's ``pool_size`` of them, so the pool's
    overflow always stays for every other call (the lock renewal, the pass's own reads) and for
    threads beyond that many, which take a connection per call as before. A kept connection is
    given back when its thread ends, when a statement on it fails, and by ``close_all``
    (``SQLStorage.close``).

    A pool thread of the scheduler runs one job at a time, so its connection is never shared.
    Only a ``QueuePool`` (PostgreSQL, SQLite files) has connections to keep; with another pool
    every call takes its own.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._local = threading.local()
        self._guard = threading.Lock()
        self._every: set[PoolProxiedConnection] = set()
        pool = engine.pool
        self._limit = pool.size() if isinstance(pool, QueuePool) else 0

    def get(self) -> _Kept:
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is not None:
            return kept
        pooled = self._engine.raw_connection()
        try:
            cursor = pooled.cursor()
        except BaseException:
            pooled.close()
            raise
        with self._guard:
            keep = len(self._every) < self._limit
            if keep:
                self._every.add(pooled)
        kept = _Kept(pooled, cursor, one_shot=not keep)
        if keep:
            weakref.finalize(kept, self._thread_ended, pooled, cursor).atexit = False
            self._local.kept = kept
        return kept

    def done(self, kept: _Kept, failed: bool = False, lost: BaseException | None = None) -> None:
        """After a call on ``kept``: a one-shot connection goes back to the pool, and so does a
        kept one whose call failed (first invalidated when it was ``lost``)."""
        if not (kept.one_shot or failed):
            return
        if not kept.one_shot:
            self._local.kept = None
            with self._guard:
                self._every.discard(kept.pooled)
        _give_back(kept.pooled, kept.cursor, lost)

    def _thread_ended(self, pooled: PoolProxiedConnection, cursor: Any) -> None:
        with self._guard:
            if pooled not in self._every:
                return  # given back already
            self._every.discard(pooled)
        _give_back(pooled, cursor)

    def close_all(self) -> None:
        """Give every kept connection back; called once no thread uses them any more."""
        with self._guard:
            every, self._every = self._every, set()
        for pooled in every:
            with contextlib.suppress(Exception):
                pooled.close()


def _give_back(
    pooled: PoolProxiedConnection, cursor: Any, lost: BaseException | None = None
) -> None:
    with contextlib.suppress(Exception):
        cursor.close()
    if lost is not None:
        pooled.invalidate(lost)
    with contextlib.suppress(Exception):
        pooled.close()


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
        self._held = _HeldConnections(engine)
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
        pool's size (``_HeldConnections``), so a job costs no pool check-out and return. The
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
        """The calling thread's kept DBAPI cursor (``_HeldConnections``), for statements run on
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
        arrays = self._array_insert() if self._dialect.new_jobs_as_arrays else None
        for start in range(0, len(jobs), size):
            page = jobs[start : start + size]
            if arrays is not None:
                result = conn.exec_driver_sql(arrays.sql, arrays.parameters(page))
            else:
                result = conn.execute(self._sql.add_jobs, self._new_job_params(page))
            stored.update(result.scalars().all())
        return [job.id in stored for job in jobs]

    def _array_insert(self) -> ArrayInsert:
        """``Statements.add_jobs`` as the driver runs it, compiled on first use (per prefix)."""
        if self._array_insert_statement is None:
            self._array_insert_statement = ArrayInsert(self._sql.add_jobs, self._engine.dialect)
        return self._array_insert_statement

    def _new_job_params(self, page: Sequence[NewJob]) -> list[dict[str, Any]]:
        """One parameter set per job, for the VALUES list of ``Statements._add_jobs``."""
        return [
            {
                "id": job.id,
                "task": job.task,
                "payload": job.payload,
                "due_at": float(job.due_at),
                "envelope": job.envelope,
            }
            for job in page
        ]

    def _lease_params(self, lock: LockLease) -> dict[str, Any]:
        """The fence of a write made under ``lock`` (lock calls and recurring firings send it)."""
        return {"lock_name": lock.name, "lock_owner": lock.owner, "lock_token": lock.token}
