"""The browse family of the ``Storage`` contract on SQL (``BrowseStore`` in ``base.py``).

A page is one ``SELECT … WHERE … ORDER BY due_at, id LIMIT n``. The keyset is a row-value
comparison, ``(due_at, id) > (:after_due_at, :after_id)``, which both dialects turn into the
start of an index range, so a page costs its own size wherever it is. Indexes (schema version 6,
see ``sql_tables``): ``(due_at, id)`` when no state is asked; with a state, SQLite's due index
``(state, due_at, id)``, and on PostgreSQL the partial due index for scheduled jobs, a partial
``(state, due_at, id)`` for the finished states, the partial ``(due_at, id)`` indexes of the
failed and the held jobs (schema versions 8 and 10), and for claimed jobs (the few in flight)
their lease index and a sort. A task filter is checked on the rows met while walking that index:
no index includes the task, since every index here is written on every state change of every
job (state is indexed, so no update is HOT on PostgreSQL); the cost is the rows of the other tasks
walked past before the page fills (a rare task with no due range can mean a walk of every job in
that state).

The text filters match characters exactly, case included, each pattern a bound parameter. On
PostgreSQL they are ``LIKE`` with ``%`` and ``_`` escaped (``/`` is the escape character), which
the planner turns into a range of the primary key for an id prefix only where the column's
collation is C. On SQLite, whose ``LIKE`` ignores ASCII case, a prefix is ``substr(…) = prefix``
and a contained text ``instr``; an id prefix that starts at most ``ID_RANGE_AT_MOST`` ids (counted
first on the primary key, no further than that) is read as the range ``[prefix, successor)`` of
the primary key and its rows sorted, since walking the due index past the others would cost more.
Otherwise the text filters, like the task, are checked on the rows walked.

``finished_counts`` groups the ``(state, updated_at)`` index of schema version 5 by bucket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from storage_adapters.checks.browse import (
    MAX_PAGE,
    Buckets,
    check_job_query,
    check_page_limit,
    count_finished,
)
from storage_adapters.records import JobQuery, JobRecord, JobState
from storage_adapters.sql.dialect import state_is
from storage_adapters.sql.job_rows import job_record
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = [
    "ID_RANGE_AT_MOST",
    "SQLBrowseStore",
    "finished_counts_statement",
    "ids_in_range_statement",
    "like_escaped",
    "page_params",
    "page_statement",
    "prefix_end",
]


def page_statement(
    jobs: sa.Table, query: JobQuery, dialect: str = "postgresql", id_range: bool = False
) -> sa.Select[Any]:
    """One page of ``query`` (checked), bound by ``:limit`` and the parameters its filters name.

    The state is a literal (see ``sql_statements``) so PostgreSQL can match partial indexes too;
    every other value is a bound parameter, so the statement's shape depends only on which filters
    are set, on ``dialect`` (``postgresql`` or ``sqlite``: the text filters differ) and, on SQLite,
    on ``id_range``: the id prefix as a range of the primary key (see the module's docstring).
    """
    conditions: list[sa.ColumnElement[bool]] = []
    if query.state is not None:
        conditions.append(state_is(jobs.c.state, query.state))
    if query.task is not None:
        conditions.append(jobs.c.task == sa.bindparam("task"))
    if query.id_prefix is not None:
        if dialect == "sqlite" and id_range:
            conditions.extend(_id_range(jobs, query.id_prefix))
        else:
            conditions.append(_starts_with(jobs.c.id, "id", dialect))
    if query.task_prefix is not None:
        conditions.append(_starts_with(jobs.c.task, "task", dialect))
    if query.error_contains is not None:
        found: sa.ColumnElement[bool]
        if dialect == "postgresql":
            found = jobs.c.last_error.like(sa.bindparam("error_pattern"), escape=_ESCAPE)
        else:
            found = sa.func.instr(jobs.c.last_error, sa.bindparam("error_text")) > 0
        conditions.append(found)
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


def page_params(
    query: JobQuery, limit: int, dialect: str = "postgresql", id_range: bool = False
) -> dict[str, Any]:
    """The parameters of ``page_statement(…, query, dialect, id_range)``."""
    params: dict[str, Any] = {"limit": limit}
    if query.task is not None:
        params["task"] = query.task
    for name, prefix in (("id", query.id_prefix), ("task", query.task_prefix)):
        if prefix is None:
            continue
        if dialect == "postgresql":
            params[f"{name}_pattern"] = like_escaped(prefix) + "%"
        elif name == "id" and id_range:
            params.update(_id_range_params(prefix))
        else:
            params[f"{name}_prefix"], params[f"{name}_length"] = prefix, len(prefix)
    if query.error_contains is not None:
        if dialect == "postgresql":
            params["error_pattern"] = f"%{like_escaped(query.error_contains)}%"
        else:
            params["error_text"] = query.error_contains
    if query.due_from is not None:
        params["due_from"] = query.due_from
    if query.due_to is not None:
        params["due_to"] = query.due_to
    if query.after is not None:
        params["after_due_at"], params["after_id"] = query.after
    return params


#: On SQLite, an id prefix starting at most this many ids is read as a range of the primary key
#: (its rows then sorted: a few milliseconds); one starting more, by the walk of the due index.
ID_RANGE_AT_MOST = 10 * MAX_PAGE
_ESCAPE = "/"


def like_escaped(text: str) -> str:
    """``text`` matched literally inside a ``LIKE … ESCAPE '/'`` pattern."""
    for special in (_ESCAPE, "%", "_"):
        text = text.replace(special, _ESCAPE + special)
    return text


def prefix_end(prefix: str) -> str | None:
    """The least string after every string that starts with ``prefix`` in code point order (the
    order of UTF-8's bytes: SQLite's binary collation); ``None`` when there is none."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:  # surrogates are no characters: the next one is U+E000
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def _starts_with(column: sa.ColumnElement[str], name: str, dialect: str) -> sa.ColumnElement[bool]:
    if dialect == "postgresql":
        return column.like(sa.bindparam(f"{name}_pattern"), escape=_ESCAPE)
    start = sa.func.substr(column, 1, sa.bindparam(f"{name}_length"))
    return start == sa.bindparam(f"{name}_prefix")


def _id_range(jobs: sa.Table, prefix: str) -> list[sa.ColumnElement[bool]]:
    """``id`` in ``[prefix, prefix_end(prefix))``: a range of the primary key (SQLite only)."""
    conditions = [jobs.c.id >= sa.bindparam("id_from")]
    if prefix_end(prefix) is not None:
        conditions.append(jobs.c.id < sa.bindparam("id_until"))
    return conditions


def _id_range_params(prefix: str) -> dict[str, Any]:
    params: dict[str, Any] = {"id_from": prefix}
    end = prefix_end(prefix)
    if end is not None:
        params["id_until"] = end
    return params


def ids_in_range_statement(jobs: sa.Table, prefix: str) -> sa.Select[Any]:
    """How many ids start with ``prefix``, counted on the primary key no further than
    ``:at_most`` (the parameters: ``_id_range_params`` and ``at_most``)."""
    walked = sa.select(jobs.c.id).where(*_id_range(jobs, prefix)).limit(sa.bindparam("at_most"))
    return sa.select(sa.func.count()).select_from(walked.subquery())


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
        wanted = check_page_limit(limit)
        dialect = self._dialect.name
        id_range = dialect == "sqlite" and checked.id_prefix is not None
        if id_range and checked.id_prefix is not None:
            id_range = self._few_ids(checked.id_prefix)
        statement = page_statement(self._tables.jobs, checked, dialect, id_range)
        # The due-set read settings (no bitmap or sequential scan on PostgreSQL) keep the ordered
        # index walk even when statistics are stale; it is the best plan for "first n in order".
        rows = self._due_rows(statement, page_params(checked, wanted, dialect, id_range))
        return [job_record(row) for row in rows]

    def _few_ids(self, prefix: str) -> bool:
        """Whether at most ``ID_RANGE_AT_MOST`` ids start with ``prefix`` (SQLite: read on the
        primary key alone, and never more than that many of its entries)."""
        params = {**_id_range_params(prefix), "at_most": ID_RANGE_AT_MOST + 1}
        counted = self._scalar(ids_in_range_statement(self._tables.jobs, prefix), params)
        return int(counted) <= ID_RANGE_AT_MOST

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
