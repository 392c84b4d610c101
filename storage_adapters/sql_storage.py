"""The ``Storage`` contract in SQLAlchemy Core, shared by the PostgreSQL and SQLite adapters.

The engine runs in autocommit mode: nearly every operation is one statement, which the server
makes atomic on its own, so a ``BEGIN``/``COMMIT`` pair would only add two round trips. Explicit
transactions are opened only where several statements must be all-or-nothing (a large
``add_jobs``, settling claims of several tokens, firing a recurring job, schema set-up), with the
dialect's own ``BEGIN`` (``BEGIN IMMEDIATE`` on SQLite, so writers queue on the busy timeout
instead of failing later when a read lock cannot be upgraded).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError

from .checks import (
    check_new_jobs,
    check_save_mode,
    epoch_seconds,
    flag,
    non_negative_offset,
    optional_epoch_seconds,
    positive_count,
    positive_seconds,
)
from .errors import (
    RecordExistsError,
    RecordNotFoundError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from .records import (
    ClaimedJob,
    Firing,
    JobRecord,
    JobState,
    LockLease,
    NewJob,
    NewRecurring,
    RecurringRecord,
    SaveMode,
    validate_lock_name,
    validate_prefix,
)
from .sql_job_rows import claimed_job, job_record
from .sql_recurring_rows import firing_params, recurring_record, save_params
from .sql_statements import INITIAL_RECURRING_VERSION, NEW_JOB_FIELDS, Dialect, Statements
from .sql_tables import build_tables, migrate

__all__ = ["ADD_JOBS_PAGE_SIZE", "SQLStorage"]

ADD_JOBS_PAGE_SIZE = 1000  # new jobs per INSERT statement
_UNDEFINED_TABLE = "42P01"


class _RollBack(Exception):
    """Raised inside ``_transaction`` to end it with ``ROLLBACK``: its first write was refused."""


class SQLStorage:
    """One prefix's jobs and locks in an SQL database reached through ``engine``.

    Subclasses only build the engine and describe their ``Dialect``; every behaviour is here.
    """

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

    # -- plumbing ---------------------------------------------------------------------------

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
        ``_RollBack`` rolls back at once and is not raised further."""
        with self._connection() as conn:
            conn.exec_driver_sql(self._dialect.begin)
            try:
                yield conn
            except _RollBack:
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

    # -- set-up and clock -------------------------------------------------------------------

    def setup(self) -> None:
        with self._transaction() as conn:
            self._dialect.serialise_schema_changes(conn, self._prefix)
            migrate(conn, self._tables, self._dialect.name, self._dialect.now)

    def now(self) -> float:
        return float(self._scalar(self._sql.now))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    def drop(self) -> None:
        with self._transaction() as conn:
            tables = self._tables
            for table in (tables.jobs, tables.locks, tables.recurring, tables.schema_version):
                conn.execute(sa.schema.DropTable(table, if_exists=True))

    # -- accept -----------------------------------------------------------------------------

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        check_new_jobs(jobs)
        if not jobs:
            return []
        # One page is one statement, atomic by itself; more pages need a transaction around them.
        scope = self._transaction() if len(jobs) > ADD_JOBS_PAGE_SIZE else self._connection()
        with scope as conn:
            return self._insert_jobs(conn, jobs)

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

    # -- release ----------------------------------------------------------------------------

    def fetch_due_ids(self, limit: int) -> list[str]:
        positive_count("limit", limit)
        return [row.id for row in self._due_rows(self._sql.fetch_due, {"limit": int(limit)})]

    def _claim_params(self, lock: LockLease, lease: float) -> dict[str, Any]:
        return {
            "lock_name": lock.name,
            "lock_owner": lock.owner,
            "lock_token": lock.token,
            "lease": positive_seconds("lease", lease),
        }

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        params = self._claim_params(lock, lease)
        rows = self._rows(self._sql.claim, {**params, "job_id": job_id})
        return claimed_job(rows[0], lock.token) if rows else None

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        params = {**self._claim_params(lock, lease), "limit": positive_count("limit", limit)}
        rows = self._due_rows(self._sql.claim_due, params)
        claims = [claimed_job(row, lock.token) for row in rows]
        # RETURNING follows the update's physical order, not the due order the contract promises.
        return sorted(claims, key=lambda c: (c.due_at, c.id))

    def _settle(
        self, statement: sa.Update, claims: Sequence[ClaimedJob], error: str | None = None
    ) -> list[str]:
        """One statement per fencing token; several run as one transaction, so all or none."""
        by_token: dict[int, list[str]] = {}
        for claim in claims:
            by_token.setdefault(claim.token, []).append(claim.id)
        if not by_token:
            return []
        scope: AbstractContextManager[Connection] = (
            self._transaction() if len(by_token) > 1 else self._connection()
        )
        settled: set[str] = set()
        with scope as conn:
            for token, ids in by_token.items():
                params = {"ids": self._dialect.bind_ids(ids), "held_token": token, "error": error}
                settled.update(conn.execute(statement, params).scalars())
        return [job_id for job_id in dict.fromkeys(c.id for c in claims) if job_id in settled]

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        return self._settle(self._sql.mark_enqueued, claims)

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        return self._settle(self._sql.unclaim, claims, error)

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        return self._settle(self._sql.expire, claims, reason)

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        return self._changed(self._sql.recover, {"limit": positive_count("limit", limit)})

    def next_due_at(self) -> float | None:
        due = self._scalar(self._sql.next_due_at)
        return None if due is None else float(due)

    # -- management -------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord | None:
        rows = self._rows(self._sql.get_job, {"job_id": job_id})
        return job_record(rows[0]) if rows else None

    def list_jobs(self, state: JobState | None, limit: int, offset: int = 0) -> list[JobRecord]:
        positive_count("limit", limit)
        statement = (
            self._sql.list_all if state is None else self._sql.list_by_state[JobState(state)]
        )
        rows = self._rows(statement, {"limit": int(limit), "offset": non_negative_offset(offset)})
        return [job_record(row) for row in rows]

    def cancel(self, job_id: str) -> bool:
        return self._changed(self._sql.cancel, {"job_id": job_id}) == 1

    def reschedule(self, job_id: str, due_at: float) -> bool:
        params = {"job_id": job_id, "new_due_at": epoch_seconds("due_at", due_at)}
        return self._changed(self._sql.reschedule, params) == 1

    def count_by_state(self) -> dict[JobState, int]:
        counts = dict.fromkeys(JobState, 0)
        for row in self._rows(self._sql.count_by_state, {}):
            counts[JobState(row.state)] = int(row.jobs)
        return counts

    # -- the distributed lock ---------------------------------------------------------------

    def acquire_lock(self, name: str, owner: str, lease: float) -> LockLease | None:
        validate_lock_name(name)
        params = {"lock_name": name, "lock_owner": owner, "lease": positive_seconds("lease", lease)}
        rows = self._rows(self._sql.acquire_lock, params)
        if not rows:
            return None
        return LockLease(name, owner, int(rows[0].token), float(rows[0].expires_at))

    def _lease_params(self, lock: LockLease) -> dict[str, Any]:
        return {"lock_name": lock.name, "lock_owner": lock.owner, "lock_token": lock.token}

    def renew_lock(self, lock: LockLease, lease: float) -> LockLease | None:
        params = {**self._lease_params(lock), "lease": positive_seconds("lease", lease)}
        expires_at = self._scalar(self._sql.renew_lock, params)
        if expires_at is None:
            return None
        return LockLease(lock.name, lock.owner, lock.token, float(expires_at))

    def release_lock(self, lock: LockLease) -> bool:
        return self._changed(self._sql.release_lock, self._lease_params(lock)) == 1

    def lock_holder(self, name: str) -> LockLease | None:
        validate_lock_name(name)
        rows = self._rows(self._sql.lock_holder, {"lock_name": name})
        if not rows:
            return None
        return LockLease(name, rows[0].owner, int(rows[0].token), float(rows[0].expires_at))

    # -- recurring jobs ---------------------------------------------------------------------

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        check_save_mode(mode)
        statement = self._sql.save_recurring[mode]
        # One statement: it writes nothing and returns no row when the mode refuses.
        version = self._scalar(statement, save_params(recurring))
        if version is None:
            if mode == "create":
                raise RecordExistsError(f"recurring job {recurring.id!r} already exists")
            raise RecordNotFoundError(f"recurring job {recurring.id!r} does not exist")
        return int(version) == INITIAL_RECURRING_VERSION

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        rows = self._rows(self._sql.get_recurring, {"recurring_id": recurring_id})
        return recurring_record(rows[0]) if rows else None

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        params = {"limit": positive_count("limit", limit), "offset": non_negative_offset(offset)}
        return [recurring_record(row) for row in self._rows(self._sql.list_recurring, params)]

    def remove_recurring(self, recurring_id: str) -> bool:
        return self._changed(self._sql.remove_recurring, {"recurring_id": recurring_id}) == 1

    def set_recurring_enabled(
        self, recurring_id: str, enabled: bool, next_run_at: float | None
    ) -> bool:
        params = {
            "recurring_id": recurring_id,
            "new_enabled": flag("enabled", enabled),
            "new_next_run_at": optional_epoch_seconds("next_run_at", next_run_at),
        }
        return self._changed(self._sql.set_recurring_enabled, params) == 1

    def fetch_due_recurring(self, limit: int) -> list[RecurringRecord]:
        params = {"limit": positive_count("limit", limit)}
        return [recurring_record(row) for row in self._rows(self._sql.fetch_due_recurring, params)]

    def fire_recurring(
        self, recurring_id: str, version: int, lock: LockLease, firing: Firing
    ) -> list[bool] | None:
        """The compare-and-set comes first: it takes the recurring row's write lock, so a
        racing firing of the same version waits for this one and then matches nothing."""
        params = {**firing_params(recurring_id, version, firing), **self._lease_params(lock)}
        with self._transaction() as conn:
            if conn.execute(self._sql.fire_recurring, params).first() is None:
                raise _RollBack
            return self._insert_jobs(conn, firing.jobs)
        return None

    def count_recurring(self) -> int:
        return int(self._scalar(self._sql.count_recurring))
