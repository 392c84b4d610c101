"""The road around SQLAlchemy's execution layer for the statements every job runs: statements
compiled once for the DBAPI driver, and the pooled connections threads keep to run them on.

The two statements every job of the per-job release path runs (its claim, and the mark that ends
it) skip SQLAlchemy's execution layer: ``SQLPlumbing._driver_rows`` runs them, compiled once
(``DriverStatement``), on a DBAPI connection and cursor each thread keeps for them
(``HeldConnections``). On that path the scheduler is bound by Python CPU per job under one GIL,
and SQLAlchemy's per-execution work (execution context, result and row objects, a ``Connection``
around a pool check-out and return) was about a third of it. A client storing one job per call
takes the same road for its insert (``Statements.add_job``): there the bulk statement
(SQLAlchemy's execution layer, and five arrays of one element each to dump and unnest) cost about
half of the call's CPU. A bulk insert on PostgreSQL, and a chunk of recurring firings, send their
arrays in the driver's binary format (``BinaryArrays``); on SQLite a bulk insert is one statement
whose row of ``VALUES`` is repeated once per job (``ValuesInsert``).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import PoolProxiedConnection, QueuePool
from sqlalchemy.sql.compiler import SQLCompiler

from storage_adapters.records import NewJob
from storage_adapters.sql.job_statements import NEW_JOB_FIELDS

__all__ = ["ArrayInsert", "BinaryArrays", "DriverStatement", "HeldConnections", "ValuesInsert"]


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
    def order(self) -> tuple[str, ...] | None:
        """The parameters' names in the order a positional driver takes them (else ``None``)."""
        return self._order

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


class BinaryArrays:
    """A PostgreSQL statement whose array parameters (``names``) the driver sends in its binary
    format (``%(name)b``).

    psycopg's text format for an array quotes and escapes every element with a regular
    expression (and a JSON payload or history is full of quotes): for a page of 1,000 jobs that
    was about two thirds of the CPU a bulk accept cost the caller. The binary format writes each
    element as its length and its UTF-8 bytes. The arrays skip SQLAlchemy's bind processors
    (they only copy each list): callers give plain lists of ``str``, ``float``, ``int`` and
    ``None``, beside ``constants``.
    """

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect, names: tuple[str, ...]):
        compiled = DriverStatement(statement, dialect)
        if compiled.positional:
            raise ValueError("the arrays are named parameters (psycopg's pyformat)")
        sql = compiled.sql
        for name in names:
            placeholder = f"%({name})s"
            if sql.count(placeholder) != 1:
                raise ValueError(f"parameter {name!r} is not in the statement once")
            sql = sql.replace(placeholder, f"%({name})b")
        self.sql = sql
        #: what the statement binds besides the arrays (a new recurring job's version, say)
        self.constants = {
            name: value for name, value in compiled.defaults.items() if name not in names
        }


class ArrayInsert(BinaryArrays):
    """``Statements.add_jobs`` on PostgreSQL as the driver runs it: one array per column of
    ``NEW_JOB_FIELDS``, each in the driver's binary format."""

    ARRAYS = tuple(f"{name}s" for name in NEW_JOB_FIELDS)

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect) -> None:
        super().__init__(statement, dialect, self.ARRAYS)

    def parameters(self, page: Sequence[NewJob]) -> dict[str, Any]:
        """The parameters that insert ``page``, checked new jobs."""
        ids, tasks, payloads, due_ats, envelopes, queues = self.ARRAYS
        return {
            **self.constants,
            ids: [job.id for job in page],
            tasks: [job.task for job in page],
            payloads: [job.payload for job in page],
            due_ats: [float(job.due_at) for job in page],  # one element type per array
            envelopes: [job.envelope for job in page],
            queues: [job.queue for job in page],
        }


class ValuesInsert:
    """``Statements.add_jobs`` on SQLite as the driver runs it: the statement's one row of
    ``VALUES`` repeated once per job of a page, its text made once per page size (a bulk accept
    has two: full pages and the last), its parameters one flat tuple, row by row.

    SQLAlchemy's own multi-row insert writes every column expression once per row; the pause
    check among them is a subquery, which SQLite then reads once per row: a page costs about
    twice as much as with one ``INSERT … SELECT`` over the rows.
    """

    ROW = "(" + ", ".join("?" for _ in NEW_JOB_FIELDS) + ")"

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect) -> None:
        compiled = DriverStatement(statement, dialect)
        if compiled.order != NEW_JOB_FIELDS:
            raise ValueError("the statement binds anything but one row of new jobs, in order")
        head, found, tail = compiled.sql.partition(f"(VALUES {self.ROW})")
        if not found or self.ROW in tail:
            raise ValueError("the statement has not one row of VALUES")
        self._head, self._tail = f"{head}(VALUES ", f"){tail}"
        self._texts: dict[int, str] = {}

    def sql(self, rows: int) -> str:
        """The statement's text for a page of ``rows`` jobs."""
        text = self._texts.get(rows)
        if text is None:
            if len(self._texts) >= 8:  # a caller whose pages vary in size: keep the last few
                self._texts.clear()
            text = self._texts[rows] = self._head + ", ".join([self.ROW] * rows) + self._tail
        return text

    def parameters(self, page: Sequence[NewJob]) -> tuple[Any, ...]:
        """The parameters that insert ``page``, checked new jobs, in ``NEW_JOB_FIELDS`` order."""
        return tuple(
            value
            for job in page
            for value in (job.id, job.task, job.payload, float(job.due_at), job.envelope, job.queue)
        )


class _Kept:
    """A connection and cursor for ``_driver_rows``: kept by its thread, or ``one_shot`` (given
    back after the call). A kept one's thread-local copy goes when its thread ends, and a
    finalizer then gives the connection back to the pool."""

    __slots__ = ("__weakref__", "cursor", "one_shot", "pooled")

    def __init__(self, pooled: PoolProxiedConnection, cursor: Any, one_shot: bool) -> None:
        self.pooled = pooled
        self.cursor = cursor
        self.one_shot = one_shot


class HeldConnections:
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
