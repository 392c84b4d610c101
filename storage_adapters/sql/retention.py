"""The retention family of the ``Storage`` contract on SQL (``RetentionStore`` in ``base.py``).

One bounded statement per call: ``DELETE … WHERE id IN (SELECT id … ORDER BY updated_at LIMIT n)``.
The inner select walks the ``(state, updated_at)`` index of schema version 4 from its oldest end,
so a batch costs its own size whatever the table holds, and it never holds the table for long.
The batch's ids come back (``RETURNING``) and their execution outcomes are deleted in the same
transaction (``sql/outcomes.forget_outcomes``), through the outcomes' primary key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from storage_adapters.checks.retention import check_purge
from storage_adapters.records import JobState
from storage_adapters.sql.dialect import state_is
from storage_adapters.sql.outcomes import forget_outcomes
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLRetentionStore", "purge_statement"]


def purge_statement(jobs: sa.Table, state: JobState, dialect: str) -> sa.Delete:
    """Delete at most ``:limit`` jobs of ``state`` whose ``updated_at`` is before ``:older_than``,
    oldest first. The state is a literal (see ``sql_statements``) so the index matches it.

    On PostgreSQL the ids travel as an array (``id = ANY(ARRAY(SELECT …))``): the batch is read
    first and each row is then reached by its primary key, where ``IN (SELECT …)`` lets the
    planner hash-join the batch against a scan of every job of that state.
    """
    oldest = (
        sa.select(jobs.c.id)
        .where(state_is(jobs.c.state, state), jobs.c.updated_at < sa.bindparam("older_than"))
        .order_by(jobs.c.updated_at)
        .limit(sa.bindparam("limit"))
    )
    if dialect == "postgresql":
        # No state guard outside on PostgreSQL: a finished state is terminal, so the ids still
        # name finished rows, and the guard is not free. Right after a bulk load, before
        # autovacuum has analysed the table, the planner expects a handful of finished rows and
        # ANDs a bitmap of the WHOLE finished index with the primary-key lookups: 100-400 ms
        # per batch at 1,000,000 rows instead of ~5 ms (``benchmarks/purge.py``).
        return sa.delete(jobs).where(jobs.c.id == sa.any_(sa.func.array(oldest.scalar_subquery())))
    # the state is checked again outside: a row cannot leave a terminal state; on SQLite the
    # guard costs nothing and keeps the statement right on its own
    return sa.delete(jobs).where(jobs.c.id.in_(oldest), state_is(jobs.c.state, state))


class SQLRetentionStore(SQLPlumbing):
    """Deleting old finished jobs in bounded batches."""

    def purge_finished(
        self, states: Iterable[JobState | str], older_than: float, limit: int
    ) -> int:
        chosen, cutoff, left = check_purge(states, older_than, limit)
        jobs = self._tables.jobs
        deleted = 0
        # Oldest first across states: a state's batch is its own oldest jobs; with several states
        # the limit is shared, so the first states may take all of it (the next call goes on).
        for state in chosen:
            if left <= 0:
                break
            params = {"older_than": cutoff, "limit": left}
            count = self._purge_batch(purge_statement(jobs, state, self._dialect.name), params)
            deleted += count
            left -= count
        return deleted

    def _purge_batch(self, statement: sa.Delete, params: dict[str, Any]) -> int:
        """One batch and its jobs' outcomes in one transaction, under the dialect's
        ``due_scan_settings`` where it has them (PostgreSQL): the oldest-first read is, like a
        read of the due set, always best served by walking its index in order and stopping after
        ``limit`` rows, and a planner misled by statistics older than a bulk load would
        bitmap-scan and sort every finished job of the state instead (see
        ``postgresql.DUE_SCAN_SETTINGS``)."""
        settings = self._dialect.due_scan_settings
        begin = f"{self._dialect.begin}; {settings}" if settings else self._dialect.begin
        with self._connection() as conn:
            conn.exec_driver_sql(begin)
            ids = list(conn.execute(statement.returning(self._tables.jobs.c.id), params).scalars())
            if ids:
                bound = self._dialect.bind_ids(ids)
                forget_outcomes(conn, self._tables, self._dialect.ids_in, bound)
            conn.exec_driver_sql("COMMIT")
            return len(ids)
