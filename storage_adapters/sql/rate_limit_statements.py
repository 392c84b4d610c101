"""The SQL of rate limits: the statements of ``set_rate_limit``, ``remove_rate_limit``,
``list_rate_limits`` and ``reserve_release_slots``, and the ``defer`` that gives claimed jobs back
due at their slots (``sql/rate_limits.py`` runs them; ``sql/transactional_release.py`` runs a
``deferral`` of its own, on jobs its claim wrote ``ENQUEUED``).

A deferral binds its jobs as pairs of an id and a due time: on PostgreSQL two arrays unnested
into rows, on SQLite a JSON array of ``[id, due_at]`` pairs read by ``json_each``; either way one
statement per fencing token and page, whose text (and so its prepared plan) is the same
whatever the page holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from storage_adapters.records import JobState, PauseKind
from storage_adapters.sql.dialect import Dialect, state_is
from storage_adapters.sql.pause_statements import scheduled_or_held
from storage_adapters.sql.tables import Tables

__all__ = ["RateLimitStatements", "bind_deferred", "deferral"]


def _deferred_rows(dialect: Dialect) -> Any:
    """The jobs of a deferral as a table ``deferred(id, due_at)`` read from bound parameters
    (see the module's docstring); ``bind_deferred`` gives their values."""
    if dialect.new_jobs_as_arrays:
        arrays = (
            sa.cast(sa.bindparam("deferred_ids", type_=ARRAY(sa.String)), ARRAY(sa.String)),
            sa.cast(sa.bindparam("deferred_due_ats", type_=ARRAY(sa.Double)), ARRAY(sa.Double)),
        )
        return (
            sa.func.unnest(*arrays)
            .table_valued(sa.column("id", sa.String), sa.column("due_at", sa.Double))
            .render_derived(name="deferred")
        )
    pairs = sa.func.json_each(sa.bindparam("deferred", type_=sa.String)).table_valued("value")
    first: sa.ColumnElement[str] = sa.literal_column("'$[0]'")
    second: sa.ColumnElement[str] = sa.literal_column("'$[1]'")
    return sa.select(
        sa.func.json_extract(pairs.c.value, first, type_=sa.String).label("id"),
        sa.func.json_extract(pairs.c.value, second, type_=sa.Double).label("due_at"),
    ).subquery("deferred")


def bind_deferred(
    dialect: Dialect, ids: Sequence[str], due_ats: Sequence[float]
) -> dict[str, object]:
    """The parameters of ``deferral`` that name its jobs, ``ids[i]`` due at ``due_ats[i]``."""
    if dialect.new_jobs_as_arrays:
        return {"deferred_ids": list(ids), "deferred_due_ats": [float(at) for at in due_ats]}
    pairs = [[job_id, float(at)] for job_id, at in zip(ids, due_ats, strict=True)]
    return {"deferred": json.dumps(pairs)}


def deferral(
    jobs: sa.Table,
    given_back: sa.ColumnElement[str],
    dialect: Dialect,
    held: JobState,
    end_lease: bool,
) -> sa.Update:
    """``UPDATE`` the jobs held in state ``held`` under the fencing token ``held_token`` back to
    ``given_back`` (``scheduled_or_held``: ``HELD`` while a pause holds them, as ``unclaim``
    decides it) due at their own times, ``error`` as their last error and their attempt
    uncounted; returns their ids. ``end_lease``: clear the claim lease too (a claim has one; a
    transactional claim has none)."""
    deferred = _deferred_rows(dialect)
    values: dict[str, Any] = {
        "state": given_back,
        "claim_token": None,
        "due_at": deferred.c.due_at,
        "slot_at": deferred.c.due_at,
        "attempts": jobs.c.attempts - 1,
        "last_error": sa.bindparam("error", type_=sa.Text),
        "updated_at": dialect.now,
    }
    if end_lease:
        values["lease_until"] = None
    return (
        sa.update(jobs)
        .where(
            jobs.c.id == deferred.c.id,
            state_is(jobs.c.state, held),
            jobs.c.claim_token == sa.bindparam("held_token", type_=sa.BigInteger),
        )
        .values(values)
        .returning(jobs.c.id)
    )


#: Seconds between the due times of requeued jobs: keeps their order, about 4 float steps.
REQUEUE_STEP = 1e-6
#: How long ago the first requeued job is due: the rest follow a step apart, all due already
#: (up to a million of them) even on SQLite, whose clock moves in milliseconds.
REQUEUE_FROM = 1.0


def requeue(jobs: sa.Table, column: sa.ColumnElement[Any], dialect: Dialect) -> sa.Update:
    """``UPDATE`` the jobs whose ``column`` is ``limit_name`` that wait for a slot (Scheduled or
    Held, due at the slot they keep, still to come) to due now (from ``REQUEUE_FROM`` ago,
    ``REQUEUE_STEP`` apart in the order of their slots), without the slot or its note; its row
    count is how many moved."""
    now = dialect.now
    place = sa.func.row_number().over(order_by=(jobs.c.due_at, jobs.c.id))
    waiting = (
        sa.select(jobs.c.id, place.label("place"))
        .where(
            column == sa.bindparam("limit_name", type_=sa.String),
            sa.or_(
                state_is(jobs.c.state, JobState.SCHEDULED), state_is(jobs.c.state, JobState.HELD)
            ),
            jobs.c.slot_at == jobs.c.due_at,
            jobs.c.due_at > now,
        )
        .subquery("waiting")
    )
    return (
        sa.update(jobs)
        .where(jobs.c.id == waiting.c.id)
        .values(
            due_at=now - REQUEUE_FROM + (waiting.c.place - 1) * REQUEUE_STEP,
            slot_at=sa.null(),
            last_error=sa.null(),
            updated_at=now,
        )
    )


class RateLimitStatements:
    """The statements of one prefix's rate limits; bound parameter names are the contract with
    ``SQLRateLimitStore``."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        limits, now = tables.rate_limits, dialect.now
        # not "kind" and "name": an UPDATE's SET reserves its columns' names for itself
        kind = sa.bindparam("limit_kind", type_=sa.String)
        name = sa.bindparam("limit_name", type_=sa.String)
        numbers = {
            "count": sa.bindparam("count", type_=sa.Integer),
            "period": sa.bindparam("period", type_=sa.Double),
            "burst": sa.bindparam("burst", type_=sa.Integer),
            "set_by": sa.bindparam("set_by", type_=sa.String),
        }
        insert = dialect.insert(limits).values(
            kind=kind, name=name, **numbers, set_at=now, tat=sa.null()
        )
        # setting again replaces the numbers and who set them, and keeps when it was first set
        # and the slots reserved so far (``tat``)
        self.put = insert.on_conflict_do_update(
            index_elements=[limits.c.kind, limits.c.name],
            set_={column: insert.excluded[column] for column in numbers},
        )
        by_name = (limits.c.kind == kind, limits.c.name == name)
        self.remove = sa.delete(limits).where(*by_name)
        self.listing = sa.select(limits, now.label("now")).order_by(limits.c.kind, limits.c.name)
        # the limit's row under its write lock until the reservation commits (PostgreSQL's FOR
        # UPDATE; SQLite's compiler drops it, and its BEGIN IMMEDIATE holds the whole file)
        self.read_for_reservation = (
            sa.select(
                limits.c.count, limits.c.period, limits.c.burst, limits.c.tat, now.label("now")
            )
            .where(*by_name)
            .with_for_update()
        )
        self.write_tat = (
            sa.update(limits).where(*by_name).values(tat=sa.bindparam("new_tat", type_=sa.Double))
        )
        jobs = tables.jobs
        given_back = scheduled_or_held(tables.pauses, jobs.c.task, jobs.c.queue)
        self.defer = deferral(jobs, given_back, dialect, JobState.CLAIMED, end_lease=True)
        self.forget_slots = sa.update(limits).where(*by_name).values(tat=sa.null())
        self.requeue = {
            PauseKind.QUEUE: requeue(jobs, jobs.c.queue, dialect),
            PauseKind.TASK: requeue(jobs, jobs.c.task, dialect),
        }
