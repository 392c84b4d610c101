"""The SQL of unique jobs: the statements of ``add_unique_job`` (``sql/unique.py`` runs them and
says why they are race-free) and the error of a write that meets a held key.

Every statement that looks a key up uses the terms of ``{prefix}_jobs_unique`` (migration 11)
word for word, so both PostgreSQL and SQLite match the partial index by them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage_adapters.errors import RecordExistsError
from storage_adapters.records import JobState
from storage_adapters.sql.dialect import Dialect, state_literal
from storage_adapters.sql.job_statements import NEW_JOB_FIELDS
from storage_adapters.sql.pause_statements import scheduled_or_held
from storage_adapters.sql.tables import Tables

__all__ = ["HOLDING", "MOVABLE", "UniqueStatements", "held_key_error"]

#: The states whose jobs hold their key: the predicate of ``{prefix}_jobs_unique``, word for word.
HOLDING = (JobState.SCHEDULED, JobState.HELD, JobState.CLAIMED)
#: The holders ``"replace"`` moves (a claimed one is being sent: left alone).
MOVABLE = (JobState.SCHEDULED, JobState.HELD)

NewJobColumns = Callable[[sa.ColumnElement[Any], sa.ColumnElement[Any]], dict[str, Any]]


def _states(states: tuple[JobState, ...]) -> list[sa.ColumnElement[str]]:
    return [state_literal(state) for state in states]


class UniqueStatements:
    """The statements of one prefix's unique jobs. Each binds the new job as ``new_<field>``
    (``NEW_JOB_FIELDS``, and ``new_unique_key``): one set of parameters serves all three."""

    def __init__(self, tables: Tables, dialect: Dialect, new_job_columns: NewJobColumns) -> None:
        jobs = tables.jobs
        new = {
            name: sa.bindparam(f"new_{name}", type_=jobs.c[name].type)
            for name in (*NEW_JOB_FIELDS, "unique_key")
        }
        # the index's own terms, so each statement finds the key's holder by the index
        of_key = (
            jobs.c.task == new["task"],
            jobs.c.unique_key == new["unique_key"],
            jobs.c.state.in_(_states(HOLDING)),
        )
        self.holder = sa.select(jobs.c.id, jobs.c.state).where(*of_key)
        same = jobs.alias("same_id")
        same_id = sa.select(same.c.id).where(same.c.id == new["id"])
        # the id first: a job with it, in any state, makes the call an idempotent accept
        self.lookup = sa.select(
            same_id.scalar_subquery().label("same"),
            sa.select(jobs.c.id).where(*of_key).scalar_subquery().label("holder"),
            sa.select(jobs.c.state).where(*of_key).scalar_subquery().label("holder_state"),
        )
        fixed = new_job_columns(new["task"], new["queue"])
        self.insert = (
            dialect.insert(jobs)
            .values({**new, **fixed})
            .on_conflict_do_nothing()  # any unique violation: the id's or the key's
            .returning(jobs.c.id)
        )
        # the holder takes the new job's time, payload, envelope and queue, held or scheduled as
        # the pauses say for that queue; its id, attempts and last error stay
        self.replace = (
            sa.update(jobs)
            .where(*of_key, jobs.c.state.in_(_states(MOVABLE)), ~sa.exists(same_id))
            .values(
                due_at=new["due_at"],
                payload=new["payload"],
                envelope=new["envelope"],
                queue=new["queue"],
                state=scheduled_or_held(tables.pauses, jobs.c.task, new["queue"]),
                updated_at=dialect.now,
            )
            .returning(jobs.c.id)
        )
        self.key_of = sa.select(jobs.c.task, jobs.c.unique_key).where(
            jobs.c.id == sa.bindparam("job_id", type_=sa.String)
        )


def held_key_error(
    conn: Connection, statements: UniqueStatements, job_id: str
) -> RecordExistsError | None:
    """After a write of ``job_id`` broke a unique rule: the error naming its key, which another
    job holds (``reschedule`` of a failed unique job), or ``None`` when the job has no key."""
    row = conn.execute(statements.key_of, {"job_id": job_id}).first()
    if row is None or row.unique_key is None:
        return None
    return RecordExistsError(
        f"unique_key {row.unique_key!r} of task {row.task!r} is held by another job"
    )
