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

from storage_adapters.base import ChunkSettlement
from storage_adapters.checks.values import positive_seconds
from storage_adapters.records import ClaimedJob, JobState, LockLease
from storage_adapters.sql.dialect import Dialect, state_is
from storage_adapters.sql.job_rows import claimed_job
from storage_adapters.sql.plumbing import SQLPlumbing
from storage_adapters.sql.rate_limit_statements import bind_deferred, deferral
from storage_adapters.sql.rate_limits import checked_deferral, deferral_pages
from storage_adapters.sql.statements import Statements

__all__ = [
    "SETTLEMENTS",
    "Run",
    "SQLTransactionalReleaseStore",
    "TransactionSettlement",
    "TransactionalStatements",
]


def _state(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)


class TransactionalStatements:
    """The claim that writes a chunk ``ENQUEUED`` at once, and the settlements that undo it
    for the jobs not sent, inside the same transaction."""

    def __init__(self, sql: Statements, jobs: sa.Table, dialect: Dialect) -> None:
        now = dialect.now
        # The chunk's rows are found by their primary key alone, and only then checked for
        # being Scheduled and due, outside the locking subquery; its OFFSET 0 keeps the planner
        # from pushing those checks back into it, where they would let it pick an index. With
        # them inside, a table whose statistics predate a burst (autovacuum has not analysed it
        # yet) got a bitmap scan of the whole due index, filtered by id: every chunk read every
        # due row, so a 1,000,000-job burst ran at a third of its 50,000-job pace. FOR UPDATE
        # returns each row's newest version, so the checks see what the lock holds.
        picked = (
            sa.select(jobs.c.id, jobs.c.envelope, jobs.c.state, jobs.c.due_at)
            .where(dialect.ids_in(jobs.c.id), sql._lock_is_held())
            .offset(0)
            .with_for_update(skip_locked=True)
            .subquery("picked")
        )
        # RETURNING reads the envelope from ``picked``: the row's own is cleared by the claim
        # (an Enqueued job needs its broker message no more), the send needs it still.
        self.claim = (
            sa.update(jobs)
            .where(
                jobs.c.id == picked.c.id,
                state_is(picked.c.state, JobState.SCHEDULED),
                picked.c.due_at <= now,
            )
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
                picked.c.envelope, jobs.c.queue, jobs.c.slot_at,
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
        # given back held when its task or queue is paused: a pause waits for this transaction
        # (sql/pauses.py), so it holds the job after the commit if it did not before
        given_back = sql.scheduled_or_held(jobs.c.task, jobs.c.queue)
        self.unclaim = settle.values(state=given_back, claim_token=None)
        self.back_off = settle.values(
            state=given_back,
            claim_token=None,
            due_at=now + sa.bindparam("delay", type_=sa.Double),
        )
        self.fail = settle.values(state=_state(JobState.FAILED), claim_token=None)
        # waiting for a rate limit: given back as unclaim does, due at each job's own slot
        self.defer = deferral(jobs, given_back, dialect, JobState.ENQUEUED, end_lease=False)


#: The statements of ``ChunkSettlement``, by name.
SETTLEMENTS = ("expire", "unclaim", "back_off", "fail", "defer")

#: Runs one of ``TransactionalStatements``' statements, by name, on the open transaction.
Run = Callable[[str, Mapping[str, Any]], list[Any]]


class TransactionSettlement:
    """``ChunkSettlement`` on the open transaction: each call is one statement for its ids."""

    def __init__(self, run: Run, dialect: Dialect, token: int):
        self._run = run
        self._dialect = dialect
        self._token = token

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        self._settle("expire", claims, reason)

    def unclaim(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        self._settle("unclaim", claims, reason)

    def back_off(self, claims: Sequence[ClaimedJob], reason: str, delay: float) -> None:
        self._settle("back_off", claims, reason, delay=positive_seconds("delay", delay))

    def fail(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        self._settle("fail", claims, reason)

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> None:
        """One statement per page of the chunk's jobs (all under the chunk's token)."""
        deferred = checked_deferral(claims, due_ats, note).get(self._token, {})
        for ids, ats in deferral_pages(deferred):
            params = bind_deferred(self._dialect, ids, ats)
            self._run("defer", {**params, "held_token": self._token, "error": note})

    def _settle(
        self, which: str, claims: Sequence[ClaimedJob], reason: str, **extra: float
    ) -> None:
        if claims:
            ids = self._dialect.bind_ids([claim.id for claim in claims])
            self._run(which, {"ids": ids, "held_token": self._token, "error": reason, **extra})


class SQLTransactionalReleaseStore(SQLPlumbing):
    """``release_in_transaction`` for an SQL storage whose dialect locks rows with
    ``SKIP LOCKED`` (PostgreSQL)."""

    def release_in_transaction(
        self,
        job_ids: Sequence[str],
        lock: LockLease,
        send: Callable[[list[ClaimedJob], ChunkSettlement], None],
    ) -> list[ClaimedJob]:
        with self._held_cursor("release_in_transaction") as cursor:
            run = self._runner(cursor, ("claim", *SETTLEMENTS))
            # The due-scan settings keep the claim on the primary key whatever the statistics
            # say (a seq scan of a table a burst just filled reads every row per chunk).
            settings = self._dialect.due_scan_settings
            cursor.execute(f"BEGIN; {settings}" if settings else "BEGIN")
            try:
                params = {
                    "ids": self._dialect.bind_ids(job_ids),
                    "lock_name": lock.name,
                    "lock_owner": lock.owner,
                    "lock_token": lock.token,
                }
                rows = run("claim", params)
                claims = sorted((claimed_job(r, lock.token) for r in rows), key=_due_first)
                if claims:
                    send(claims, TransactionSettlement(run, self._dialect, lock.token))
                cursor.execute("COMMIT")
            except BaseException:
                # the connection goes back to the pool as failed whether this works or not
                with contextlib.suppress(Exception):
                    cursor.execute("ROLLBACK")
                raise
        return claims

    def _runner(self, cursor: Any, names: tuple[str, ...]) -> Run:
        """Runs ``names`` of ``TransactionalStatements`` on ``cursor``'s open transaction."""
        statements = self._transactional_statements()
        compiled = {name: self._prepared(getattr(statements, name)) for name in names}

        def run(which: str, params: Mapping[str, Any]) -> list[Any]:
            prepared = compiled[which]
            cursor.execute(prepared.sql, prepared.parameters(params))
            return list(cursor.fetchall()) if cursor.description is not None else []

        return run

    def _transactional_statements(self) -> TransactionalStatements:
        """Built once per prefix (a shard's sibling has statements of its own)."""
        made: tuple[Statements, TransactionalStatements] | None
        made = getattr(self, "_transactional", None)
        if made is None or made[0] is not self._sql:
            made = (self._sql, TransactionalStatements(self._sql, self._tables.jobs, self._dialect))
            self._transactional = made
        return made[1]


def _due_first(claim: ClaimedJob) -> tuple[float, str]:
    return (claim.due_at, claim.id)
