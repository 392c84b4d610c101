"""The ``Storage`` contract in SQLAlchemy Core, shared by the PostgreSQL and SQLite adapters.

This module holds the administration, jobs, release and lock families; the recurring-jobs family
is ``sql/recurring.py``, retention ``sql/retention.py``, browsing
``sql/browse.py``, and the plumbing under them
(connections, transactions in autocommit mode, driver errors as the contract's errors) is
``sql/plumbing.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from storage_adapters.checks.lookups import names_no_job
from storage_adapters.checks.values import (
    check_new_jobs,
    epoch_seconds,
    error_text,
    non_negative_offset,
    positive_count,
    positive_seconds,
)
from storage_adapters.records import (
    ClaimedJob,
    JobRecord,
    JobState,
    LockLease,
    NewJob,
    validate_lock_name,
)
from storage_adapters.sharding import SHARDS_META, check_shard_count
from storage_adapters.sql.browse import SQLBrowseStore
from storage_adapters.sql.instances import SQLInstanceStore
from storage_adapters.sql.job_rows import claimed_job, job_record
from storage_adapters.sql.plumbing import ADD_JOBS_PAGE_SIZE
from storage_adapters.sql.recurring import SQLRecurringStore
from storage_adapters.sql.retention import SQLRetentionStore
from storage_adapters.sql.tables import META_SINCE, migrate

__all__ = ["ADD_JOBS_PAGE_SIZE", "SQLStorage"]


class SQLStorage(SQLRecurringStore, SQLRetentionStore, SQLInstanceStore, SQLBrowseStore):
    """One prefix's jobs, locks and recurring jobs in an SQL database reached through ``engine``.

    Subclasses only build the engine and describe their ``Dialect``; every behaviour is here and
    in the classes below it.
    """

    # -- set-up and clock -------------------------------------------------------------------

    def setup(self) -> None:
        with self._transaction() as conn:
            self._dialect.serialise_schema_changes(conn, self._prefix)
            version = migrate(conn, self._tables, self._dialect.name, self._dialect.now)
        if version >= META_SINCE:  # (a test replays an older release's set-up without it)
            check_shard_count(self, self.expected_shards, self._prefix)

    def exists(self) -> bool:
        """Whether ``setup()`` ever ran under this prefix (its jobs table exists); reads only."""
        jobs = self._tables.jobs
        with self._connection() as conn:  # a server that is down: the contract's error
            return bool(sa.inspect(conn).has_table(jobs.name, schema=jobs.schema))

    def stored_shard_count(self) -> int | None:
        """The shard count recorded for this prefix (``None``: never recorded, one shard)."""
        meta = self._tables.meta
        with self._connection() as conn:  # a read: a store never set up has no record
            if not sa.inspect(conn).has_table(meta.name, schema=meta.schema):
                return None
        value = self._scalar(sa.select(meta.c.value).where(meta.c.name == SHARDS_META))
        return None if value is None else int(value)

    def store_shard_count(self, shards: int) -> int:
        """Record ``shards`` unless a count is recorded already; return the recorded one."""
        meta = self._tables.meta
        with self._transaction() as conn:
            self._dialect.serialise_schema_changes(conn, self._prefix)  # one writer at a time
            query = sa.select(meta.c.value).where(meta.c.name == SHARDS_META)
            stored = conn.execute(query).scalar()
            if stored is None:
                conn.execute(meta.insert().values(name=SHARDS_META, value=str(shards)))
                return shards
        return int(stored)

    def now(self) -> float:
        return float(self._scalar(self._sql.now))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_engine:
                self._held.close_all()
                self._engine.dispose()

    def drop(self) -> None:
        with self._transaction() as conn:
            tables = self._tables
            every = (tables.jobs, tables.locks, tables.recurring, tables.instances, tables.meta)
            for table in (*every, tables.schema_version):
                conn.execute(sa.schema.DropTable(table, if_exists=True))

    # -- accept -----------------------------------------------------------------------------

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        check_new_jobs(jobs)
        if not jobs:
            return []
        if len(jobs) == 1:  # a client storing one job per call: one statement on the driver
            (job,) = jobs
            params = {
                "id": job.id,
                "task": job.task,
                "payload": job.payload,
                "due_at": float(job.due_at),
                "envelope": job.envelope,
            }
            return [bool(self._driver_rows(self._sql.add_job, params))]
        # One page is one statement, atomic by itself; more pages need a transaction around them.
        scope = self._transaction() if len(jobs) > ADD_JOBS_PAGE_SIZE else self._connection()
        with scope as conn:
            return self._insert_jobs(conn, jobs)

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
        rows = self._driver_rows(self._sql.claim, {**params, "job_id": job_id})
        return claimed_job(rows[0], lock.token) if rows else None

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        params = {**self._claim_params(lock, lease), "limit": positive_count("limit", limit)}
        rows = self._due_rows(self._sql.claim_due, params)
        claims = [claimed_job(row, lock.token) for row in rows]
        # RETURNING follows the update's physical order, not the due order the contract promises.
        return sorted(claims, key=lambda c: (c.due_at, c.id))

    def _settle(
        self,
        statement: sa.Update,
        claims: Sequence[ClaimedJob],
        error: str | None = None,
        **extra: float,
    ) -> list[str]:
        """One statement per fencing token; several run as one transaction, so all or none.
        ``extra``: further bound parameters of ``statement``."""
        by_token: dict[int, list[str]] = {}
        for claim in claims:
            by_token.setdefault(claim.token, []).append(claim.id)
        if not by_token:
            return []
        settled: set[str] = set()
        if len(by_token) == 1:  # one statement, atomic by itself: the per-job path's mark
            ((token, ids),) = by_token.items()
            params = {
                "ids": self._dialect.bind_ids(ids),
                "held_token": token,
                "error": error,
                **extra,
            }
            settled.update(row[0] for row in self._driver_rows(statement, params))
        else:
            with self._transaction() as conn:
                for token, ids in by_token.items():
                    params = {
                        "ids": self._dialect.bind_ids(ids),
                        "held_token": token,
                        "error": error,
                        **extra,
                    }
                    settled.update(conn.execute(statement, params).scalars())
        return [job_id for job_id in dict.fromkeys(c.id for c in claims) if job_id in settled]

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        return self._settle(self._sql.mark_enqueued, claims)

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        return self._settle(self._sql.unclaim, claims, error)

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        return self._settle(self._sql.expire, claims, reason)

    def back_off(self, claims: Sequence[ClaimedJob], error: str, delay: float) -> list[str]:
        delay = positive_seconds("delay", delay)
        return self._settle(self._sql.back_off, claims, error_text(error), delay=delay)

    def fail(self, claims: Sequence[ClaimedJob], error: str) -> list[str]:
        return self._settle(self._sql.fail, claims, error_text(error))

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        return self._changed(self._sql.recover, {"limit": positive_count("limit", limit)})

    def next_due_at(self) -> float | None:
        due = self._scalar(self._sql.next_due_at)
        return None if due is None else float(due)

    def next_work_at(self) -> float | None:
        (row,) = self._rows(self._sql.next_work_at, {})
        return min((float(at) for at in row if at is not None), default=None)

    # -- management -------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord | None:
        if names_no_job(job_id):
            return None
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
        if names_no_job(job_id):
            return False
        return self._changed(self._sql.cancel, {"job_id": job_id}) == 1

    def reschedule(self, job_id: str, due_at: float) -> bool:
        params = {"job_id": job_id, "new_due_at": epoch_seconds("due_at", due_at)}
        if names_no_job(job_id):
            return False
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
