"""The SQL of pauses: which jobs a pause holds, the state a job becomes instead of ``SCHEDULED``,
and the statements of ``pause``, ``resume`` and ``list_pauses`` (``sql/pauses.py`` runs them).

Every statement that makes a job ``SCHEDULED`` (an accept, a recurring firing, a claim given back
or recovered, a failed job rescheduled) writes ``scheduled_or_held`` instead: the pauses are read
in that same statement, never first in Python, so a pause cannot land between the read and the
write. With no pause in force, which is nearly always, the first ``NOT EXISTS`` over the whole
(empty) table is read once per statement and the per-row match never runs.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from storage_adapters.records import JobState, PauseKind
from storage_adapters.sql.dialect import Dialect, state_is, state_literal
from storage_adapters.sql.tables import Tables

__all__ = ["PauseStatements", "paused", "scheduled_or_held"]


def _kind(kind: PauseKind) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{kind.value}'", sa.String)


def paused(
    pauses: sa.Table, task: sa.ColumnElement[Any], queue: sa.ColumnElement[Any]
) -> sa.Exists:
    """Whether a pause in force holds a job of ``task`` sent to ``queue`` (a ``NULL`` queue is
    matched by no queue pause): two probes of the pauses' primary key."""
    return sa.exists().where(
        sa.or_(
            sa.and_(pauses.c.kind == _kind(PauseKind.TASK), pauses.c.name == task),
            sa.and_(pauses.c.kind == _kind(PauseKind.QUEUE), pauses.c.name == queue),
        )
    )


def scheduled_or_held(
    pauses: sa.Table, task: sa.ColumnElement[Any], queue: sa.ColumnElement[Any]
) -> sa.ColumnElement[str]:
    """``'held'`` for a job a pause holds, else ``'scheduled'``: the state of every transition
    that would make a job ``SCHEDULED``. The uncorrelated ``NOT EXISTS`` first is evaluated once
    per statement (an init plan on PostgreSQL, a once-only subquery on SQLite), so while no pause
    is in force a page of 1,000 accepted jobs does not probe the pauses 1,000 times."""
    scheduled = state_literal(JobState.SCHEDULED)
    return sa.case(
        (~sa.exists().select_from(pauses), scheduled),
        (paused(pauses, task, queue), state_literal(JobState.HELD)),
        else_=scheduled,
    )


class PauseStatements:
    """The statements of one prefix's pauses; bound parameter names are the contract with
    ``SQLPauseStore``. The holding and releasing updates exist per kind (``PauseKind``): a
    pause names one column, and the plain ``column = :name`` lets each use what index it can."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        pauses, jobs, now = tables.pauses, tables.jobs, dialect.now
        kind = sa.bindparam("kind", type_=sa.String)
        name = sa.bindparam("name", type_=sa.String)
        insert = dialect.insert(pauses).values(
            kind=kind,
            name=name,
            note=sa.bindparam("note", type_=sa.Text),
            paused_by=sa.bindparam("paused_by", type_=sa.String),
            paused_at=now,
        )
        # pausing again replaces the note and who paused, and keeps when it was first paused
        self.put = insert.on_conflict_do_update(
            index_elements=[pauses.c.kind, pauses.c.name],
            set_={"note": insert.excluded.note, "paused_by": insert.excluded.paused_by},
        )
        self.remove = sa.delete(pauses).where(pauses.c.kind == kind, pauses.c.name == name)
        self.listing = sa.select(pauses).order_by(pauses.c.kind, pauses.c.name)
        columns = {PauseKind.TASK: jobs.c.task, PauseKind.QUEUE: jobs.c.queue}
        self.hold = {
            which: sa.update(jobs)
            .where(state_is(jobs.c.state, JobState.SCHEDULED), column == name)
            .values(state=state_literal(JobState.HELD), updated_at=now)
            for which, column in columns.items()
        }
        # run after the pause's row is deleted: a job another pause holds stays held
        self.release = {
            which: sa.update(jobs)
            .where(
                state_is(jobs.c.state, JobState.HELD),
                column == name,
                ~paused(pauses, jobs.c.task, jobs.c.queue),
            )
            .values(state=state_literal(JobState.SCHEDULED), updated_at=now)
            for which, column in columns.items()
        }
