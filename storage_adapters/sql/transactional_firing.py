"""PostgreSQL's firing that sends (``TransactionalFiringStorage`` in ``contract/abilities.py``):
a chunk of recurring jobs is fired, its due firings written Enqueued, sent and settled in ONE
transaction.

Fired the plain way, a firing is inserted Scheduled, then claimed by the delayed scheduler (its
row written again), sent and committed by a second transaction: two writes of every row and a
read of the due set between them. Here the compare-and-set on the recurring rows and the insert
run in the transaction the send runs in, and the insert writes each firing that is due and not
held by a pause ``ENQUEUED`` at once, under the recurring lock's fencing token, so the
transactional release's settlements (``TransactionSettlement``) give back what was not sent.
A crash or a lost connection before the commit rolls back the firings with the advance of
their recurring jobs, so the next pass fires the same ticks again (the same firing ids): no
tick is lost, and what was sent may be sent again, the transactional release's bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from storage_adapters.base import ChunkSend
from storage_adapters.checks.values import check_planned_firings
from storage_adapters.records import ClaimedJob, JobState, LockLease, NewJob, PlannedFiring
from storage_adapters.sql.dialect import Dialect
from storage_adapters.sql.driver import ArrayInsert
from storage_adapters.sql.plumbing import ADD_JOBS_PAGE_SIZE
from storage_adapters.sql.recurring import SQLRecurringStore
from storage_adapters.sql.recurring_rows import FIRING_ARRAYS, firing_arrays
from storage_adapters.sql.statements import Statements
from storage_adapters.sql.transactional_release import (
    SETTLEMENTS,
    SQLTransactionalReleaseStore,
    TransactionSettlement,
)

__all__ = ["SQLTransactionalFiringStore", "enqueued_firings_insert"]


def _state(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)


def enqueued_firings_insert(sql: Statements, jobs: sa.Table, dialect: Dialect) -> sa.Insert:
    """``Statements.add_jobs`` for firings that are sent in the same transaction: a job due now
    and not held by a pause is written ``ENQUEUED`` (its first attempt, under ``lock_token``,
    without the broker message it no longer needs); the others as ``add_jobs`` writes them.
    Returns each new job's id and state."""
    rows = sql._arrays_as_rows()
    now = dialect.now
    waiting = sql.scheduled_or_held(rows.c.task, rows.c.queue)
    goes = sa.and_(waiting == _state(JobState.SCHEDULED), rows.c.due_at <= now)
    token = sa.bindparam("lock_token", type_=sa.BigInteger)
    values: dict[str, sa.ColumnElement[Any]] = {
        "id": rows.c.id,
        "task": rows.c.task,
        "payload": rows.c.payload,
        "due_at": rows.c.due_at,
        "envelope": sa.case((goes, sa.null()), else_=rows.c.envelope),
        "queue": rows.c.queue,
        "state": sa.case((goes, _state(JobState.ENQUEUED)), else_=waiting),
        "attempts": sa.case((goes, sa.literal_column("1")), else_=sa.literal_column("0")),
        "claim_token": sa.case((goes, token), else_=sa.null()),
        "created_at": now,
        "updated_at": now,
    }
    insert = dialect.insert(jobs).from_select(list(values), sa.select(*values.values()))
    return insert.on_conflict_do_nothing(index_elements=[jobs.c.id]).returning(
        jobs.c.id, jobs.c.state
    )


class SQLTransactionalFiringStore(SQLTransactionalReleaseStore, SQLRecurringStore):
    """``fire_and_send_in_transaction`` for PostgreSQL (beside its transactional release)."""

    def fire_and_send_in_transaction(
        self,
        lock: LockLease,
        planned: Sequence[PlannedFiring],
        send: ChunkSend,
    ) -> list[list[bool] | None]:
        check_planned_firings(planned)
        if not planned:
            return []
        with self._held_cursor("fire_and_send_in_transaction") as cursor:
            cursor.execute("BEGIN")
            try:
                fired, jobs, states = self._fire_rows(cursor, lock, planned)
                claims = sorted(
                    (_claim(job, lock.token) for job in jobs if states.get(job.id) == "enqueued"),
                    key=_due_first,
                )
                if claims:
                    run = self._runner(cursor, SETTLEMENTS)
                    send(claims, TransactionSettlement(run, self._dialect, lock.token))
                cursor.execute("COMMIT")
            except BaseException:
                # the connection goes back to the pool as failed whether this works or not
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
                raise
        return [
            [job.id in states for job in item.firing.jobs] if item.recurring_id in fired else None
            for item in planned
        ]

    def _fire_rows(
        self, cursor: Any, lock: LockLease, planned: Sequence[PlannedFiring]
    ) -> tuple[set[str], list[NewJob], dict[str, str]]:
        """On the open transaction: the compare-and-sets (the ids that held), then the firing
        jobs of those, each new one's state by id."""
        statement = self._sql.fire_recurring_many
        assert statement is not None  # PostgreSQL builds the chunk's compare-and-set
        cas = self._compiled_arrays(statement, FIRING_ARRAYS)
        fence = self._lease_params(lock)
        cursor.execute(cas.sql, {**cas.constants, **fence, **firing_arrays(planned)})
        fired = {row[0] for row in cursor.fetchall()}
        jobs = [job for item in planned if item.recurring_id in fired for job in item.firing.jobs]
        insert = self._firings_insert()
        states: dict[str, str] = {}
        for start in range(0, len(jobs), ADD_JOBS_PAGE_SIZE):
            page = jobs[start : start + ADD_JOBS_PAGE_SIZE]
            cursor.execute(insert.sql, {**insert.parameters(page), "lock_token": lock.token})
            states.update((job_id, state) for job_id, state in cursor.fetchall())
        return fired, jobs, states

    def _firings_insert(self) -> ArrayInsert:
        """``enqueued_firings_insert`` as the driver runs it, built once per prefix."""
        made: tuple[Statements, ArrayInsert] | None = getattr(self, "_firings", None)
        if made is None or made[0] is not self._sql:
            statement = enqueued_firings_insert(self._sql, self._tables.jobs, self._dialect)
            made = (self._sql, ArrayInsert(statement, self._engine.dialect))
            self._firings = made
        return made[1]


def _claim(job: NewJob, token: int) -> ClaimedJob:
    """A firing written Enqueued, as the send sees it: its first attempt, with its message."""
    return ClaimedJob(
        id=job.id,
        task=job.task,
        payload=job.payload,
        due_at=float(job.due_at),
        attempts=1,
        token=token,
        envelope=job.envelope,
        queue=job.queue,
    )


def _due_first(claim: ClaimedJob) -> tuple[float, str]:
    return (claim.due_at, claim.id)
