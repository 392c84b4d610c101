"""PostgreSQL's release path: a chunk is claimed, sent and settled in one transaction
(``TransactionalReleaseStorage`` in ``base.py``).

Claim -> send -> mark writes every job's row twice (``CLAIMED``, then ``ENQUEUED``), each time
with its payload, and costs a mark statement and commit per chunk. Here the claim writes the row
``ENQUEUED`` at once, under the row lock that ``FOR UPDATE SKIP LOCKED`` took; the send runs
while the transaction is open, and the commit settles the chunk. The row lock is the job's lock
for the send; no claim lease is needed, since a transaction cannot outlive its session: a crash
or a lost connection rolls the chunk back to ``SCHEDULED``, and the server ends a session left
idle in a transaction (``postgresql.IDLE_IN_TRANSACTION``), so a stalled client gives its rows
back within seconds, as a crashed one does. Either way what was sent before the rollback may be
sent again, never lost: the duplicate bound of a crash between send and mark, unchanged.

The statements run on the thread's kept DBAPI connection (``SQLPlumbing._driver_rows``' road:
compiled once, no SQLAlchemy execution layer), in the autocommit engine's explicit
``BEGIN``/``COMMIT``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from .base import ChunkSettlement
from .errors import StorageError
from .records import ClaimedJob, JobState, LockLease
from .sql_job_rows import claimed_job
from .sql_plumbing import DriverStatement, SQLPlumbing
from .sql_statements import Dialect, Statements, state_is

__all__ = ["SQLTransactionalRelease", "TransactionalStatements"]


def _state(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)


class TransactionalStatements:
    """The claim that writes a chunk ``ENQUEUED`` at once, and the two settlements that undo it
    for the jobs not sent, inside the same transaction."""

    def __init__(self, sql: Statements, jobs: sa.Table, dialect: Dialect) -> None:
        now = dialect.now
        ours = (dialect.ids_in(jobs.c.id), jobs.c.due_at <= now)
        picked = (
            sa.select(jobs.c.id, jobs.c.envelope)
            .where(*ours, state_is(jobs.c.state, JobState.SCHEDULED), sql._lock_is_held())
            .with_for_update(skip_locked=True)
            .subquery("picked")
        )
        # RETURNING reads the envelope from ``picked``: the row's own is cleared by the claim
        # (an Enqueued job needs its broker message no more), the send needs it still.
        self.claim = (
            sa.update(jobs)
            .where(jobs.c.id == picked.c.id)
            .values(
                state=_state(JobState.ENQUEUED),
                claim_token=sa.bindparam("lock_token", type_=sa.BigInteger),
                lease_until=None,
                attempts=jobs.c.attempts + 1,
                updated_at=now,
                envelope=None,
            )
            .returning(
                jobs.c.id, jobs.c.task, jobs.c.payload, jobs.c.due_at, jobs.c.attempts,
                picked.c.envelope,
            )
        )  # fmt: skip
        claimed = (
            dialect.ids_in(jobs.c.id),
            state_is(jobs.c.state, JobState.ENQUEUED),
            jobs.c.claim_token == sa.bindparam("held_token", type_=sa.BigInteger),
        )
        error = sa.bindparam("error", type_=sa.Text)
        settle = sa.update(jobs).where(*claimed).values(updated_at=now, last_error=error)
        self.expire = settle.values(state=_state(JobState.EXPIRED))
        self.unclaim = settle.values(state=_state(JobState.SCHEDULED), claim_token=None)


#: Runs one of ``TransactionalStatements``' statements, by name, on the open transaction.
_Run = Callable[[str, Mapping[str, Any]], list[Any]]


class _Settlement:
    """``ChunkSettlement`` on the open transaction: each call is one statement for its ids."""

    def __init__(self, run: _Run, bind_ids: Callable[[Sequence[str]], object], token: int):
        self._run = run
        self._bind_ids = bind_ids
        self._token = token

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        self._settle("expire", claims, reason)

    def unclaim(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        self._settle("unclaim", claims, reason)

    def _settle(self, which: str, claims: Sequence[ClaimedJob], reason: str) -> None:
        if claims:
            ids = self._bind_ids([claim.id for claim in claims])
            self._run(which, {"ids": ids, "held_token": self._token, "error": reason})


class SQLTransactionalRelease(SQLPlumbing):
    """``release_in_transaction`` for an SQL storage whose dialect locks rows with
    ``SKIP LOCKED`` (PostgreSQL)."""

    def release_in_transaction(
        self,
        job_ids: Sequence[str],
        lock: LockLease,
        send: Callable[[list[ClaimedJob], ChunkSettlement], None],
    ) -> list[ClaimedJob]:
        if self._closed:
            raise StorageError(f"{self!r} is closed")
        statements = self._transactional_statements()
        compiled = {
            name: self._driver_statement(getattr(statements, name))
            for name in ("claim", "expire", "unclaim")
        }
        kept = self._held.get()
        cursor = kept.cursor

        def run(which: str, params: Mapping[str, Any]) -> list[Any]:
            prepared = compiled[which]
            cursor.execute(prepared.sql, prepared.parameters(params))
            return list(cursor.fetchall()) if cursor.description is not None else []

        dialect = self._engine.dialect
        begun = False
        try:
            cursor.execute("BEGIN")
            begun = True
            params = {
                "ids": self._dialect.bind_ids(job_ids),
                "lock_name": lock.name,
                "lock_owner": lock.owner,
                "lock_token": lock.token,
            }
            rows = run("claim", params)
            claims = sorted((claimed_job(r, lock.token) for r in rows), key=_due_first)
            if claims:
                send(claims, _Settlement(run, self._dialect.bind_ids, lock.token))
            cursor.execute("COMMIT")
        except dialect.loaded_dbapi.Error as orig:
            lost = dialect.is_disconnect(orig, kept.pooled.dbapi_connection, cursor)
            self._held.done(kept, failed=True, lost=orig if lost else None)
            wrapped = DBAPIError.instance(
                "release_in_transaction",
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
            if begun:  # the connection is given back failed whether this works or not
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
            self._held.done(kept, failed=True)
            raise
        self._held.done(kept)
        return claims

    def _transactional_statements(self) -> TransactionalStatements:
        """Built once per prefix (a shard's sibling has statements of its own)."""
        made: tuple[Statements, TransactionalStatements] | None
        made = getattr(self, "_transactional", None)
        if made is None or made[0] is not self._sql:
            made = (self._sql, TransactionalStatements(self._sql, self._tables.jobs, self._dialect))
            self._transactional = made
        return made[1]

    def _driver_statement(self, statement: sa.ClauseElement) -> DriverStatement:
        prepared = self._driver_statements.get(id(statement))
        if prepared is None:
            prepared = DriverStatement(statement, self._engine.dialect)
            self._driver_statements[id(statement)] = prepared
        return prepared


def _due_first(claim: ClaimedJob) -> tuple[float, str]:
    return (claim.due_at, claim.id)
