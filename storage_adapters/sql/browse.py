"""The browse family of the ``Storage`` contract on SQL (``BrowseStore`` in ``base.py``).

A page is one ``SELECT … WHERE … ORDER BY due_at, id LIMIT n``. The keyset is a row-value
comparison, ``(due_at, id) > (:after_due_at, :after_id)``, which both dialects turn into the
start of an index range, so a page costs its own size wherever it is. Indexes (schema version 6,
see ``sql_tables``): ``(due_at, id)`` when no state is asked; with a state, SQLite's due index
``(state, due_at, id)``, and on PostgreSQL the partial due index for scheduled jobs, a partial
``(state, due_at, id)`` for the finished states, and for claimed jobs (the few in flight) their
lease index and a sort. A task filter is checked on the rows met while walking that index:
no index includes the task, since every index here is written on every state change of every
job (state is indexed, so no update is HOT on PostgreSQL); the cost is the rows of the other tasks
walked past before the page fills (a rare task with no due range can mean a walk of every job in
that state).

``finished_counts`` groups the ``(state, updated_at)`` index of schema version 5 by bucket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from storage_adapters.checks.browse import (
    Buckets,
    check_job_query,
    check_page_limit,
    count_finished,
)
from storage_adapters.records import JobQuery, JobRecord, JobState
from storage_adapters.sql.dialect import state_is
from storage_adapters.sql.job_rows import job_record
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLBrowseStore", "finished_counts_statement", "page_statement"]


def page_statement(jobs: sa.Table, query: JobQuery) -> sa.Select[Any]:
    """One page of ``query`` (checked), bound by ``:limit`` and the parameters its filters name.

    The state is a literal (see ``sql_statements``) so PostgreSQL can match partial indexes too;
    every other value is a bound parameter, so the statement's shape depends only on which filters
    are set.
    """
    conditions: list[sa.ColumnElement[bool]] = []
    if query.state is not None:
        conditions.append(state_is(jobs.c.state, query.state))
    if query.task is not None:
        conditions.append(jobs.c.task == sa.bindparam("task"))
    if query.due_from is not None:
        conditions.append(jobs.c.due_at >= sa.bindparam("due_from"))
    if query.due_to is not None:
        conditions.append(jobs.c.due_at <= sa.bindparam("due_to"))
    if query.after is not None:
        conditions.append(
            sa.tuple_(jobs.c.due_at, jobs.c.id)
            > sa.tuple_(sa.bindparam("after_due_at"), sa.bindparam("after_id"))
        )
    return (
        sa.select(jobs)
        .where(*conditions)
        .order_by(jobs.c.due_at, jobs.c.id)
        .limit(sa.bindparam("limit"))
    )


def page_params(query: JobQuery, limit: int) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": limit}
    if query.task is not None:
        params["task"] = query.task
    if query.due_from is not None:
        params["due_from"] = query.due_from
    if query.due_to is not None:
        params["due_to"] = query.due_to
    if query.after is not None:
        params["after_due_at"], params["after_id"] = query.after
    return params


def finished_counts_statement(jobs: sa.Table, state: JobState, dialect: str) -> sa.Select[Any]:
    """Jobs of ``state`` per bucket index ``floor((updated_at - :since) / :width)`` in
    ``[:since, :end)``: a range of the ``(state, updated_at)`` index, grouped as it is read.

    SQLite has ``floor`` only when built with its math functions; the offset is never negative
    there, so a cast to integer (which truncates in SQLite, where PostgreSQL would round) is
    the same floor.
    """
    offset = (jobs.c.updated_at - sa.bindparam("since")) / sa.bindparam("width")
    bucket = sa.func.floor(offset) if dialect == "postgresql" else sa.cast(offset, sa.Integer)
    return (
        sa.select(bucket.label("bucket"), sa.func.count().label("jobs"))
        .where(
            state_is(jobs.c.state, state),
            jobs.c.updated_at >= sa.bindparam("since"),
            jobs.c.updated_at < sa.bindparam("end"),
        )
        .group_by(bucket)
    )


class SQLBrowseStore(SQLPlumbing):
    """Filtered keyset pages of jobs and finish counts per time bucket."""

    def list_jobs_page(self, query: JobQuery, limit: int) -> list[JobRecord]:
        checked = check_job_query(query)
        statement = page_statement(self._tables.jobs, checked)
        # The due-set read settings (no bitmap or sequential scan on PostgreSQL) keep the ordered
        # index walk even when statistics are stale; it is the best plan for "first n in order".
        rows = self._due_rows(statement, page_params(checked, check_page_limit(limit)))
        return [job_record(row) for row in rows]

    def finished_counts(
        self, state: JobState, since: float, bucket: float
    ) -> list[tuple[float, int]]:
        return count_finished(state, since, bucket, self.now, self._finished_per_bucket)

    def _finished_per_bucket(self, chosen: JobState, buckets: Buckets) -> list[int]:
        counts = [0] * buckets.count
        params = {"since": buckets.since, "width": buckets.width, "end": buckets.end}
        for row in self._rows(
            finished_counts_statement(self._tables.jobs, chosen, self._dialect.name), params
        ):
            k = int(row.bucket)
            if 0 <= k < buckets.count:  # float rounding at an edge stays in range
                counts[k] += int(row.jobs)
        return counts

    if TYPE_CHECKING:  # provided by SQLStorage

        def now(self) -> float: ...
