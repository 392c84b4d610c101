"""The statements on the jobs table (accept, claim, settle, manage), built once per prefix by
``JobStatements``, which ``Statements`` completes with the lock's and the recurring jobs'.

They follow the rules in ``sql/statements.py``: "now" is the server's, states are literals, and
claims lock their rows with ``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from storage_adapters.checks.values import RECOVERED_REASON
from storage_adapters.records import JobState
from storage_adapters.sql.dialect import Dialect, state_is, state_literal
from storage_adapters.sql.pause_statements import scheduled_or_held
from storage_adapters.sql.tables import Tables

__all__ = ["NEW_JOB_FIELDS", "JobStatements"]

NEW_JOB_FIELDS = ("id", "task", "payload", "due_at", "envelope", "queue")


class JobStatements:
    """The Core statements of one prefix's jobs; bound parameter names are the contract with
    callers."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        self._jobs = jobs = tables.jobs
        self._locks = tables.locks
        self._pauses = tables.pauses
        self._now = dialect.now
        self.now = sa.select(dialect.now)
        self.record_columns = (
            *(jobs.c[name] for name in ("id", "task", "payload", "due_at", "state", "attempts")),
            *(jobs.c[name] for name in ("created_at", "updated_at", "last_error", "queue")),
            jobs.c.unique_key,
        )
        self.claim_columns = (
            jobs.c.id,
            jobs.c.task,
            jobs.c.payload,
            jobs.c.due_at,
            jobs.c.attempts,
            jobs.c.envelope,
            jobs.c.queue,
            jobs.c.slot_at,
        )
        self.add_jobs = self._add_jobs(dialect)
        self.add_job = self._add_job(dialect)
        self._build_claims()
        self._build_settlements(dialect)
        self._build_management()

    # -- release ----------------------------------------------------------------------------

    def scheduled_or_held(
        self, task: sa.ColumnElement[Any], queue: sa.ColumnElement[Any]
    ) -> sa.ColumnElement[str]:
        """The state a job of ``task`` and ``queue`` takes where it would become scheduled:
        held while a pause holds it (``sql/pause_statements.py``), in the same statement."""
        return scheduled_or_held(self._pauses, task, queue)

    def _new_job_columns(
        self, task: sa.ColumnElement[Any], queue: sa.ColumnElement[Any]
    ) -> dict[str, sa.ColumnElement[Any]]:
        """What a new job's row holds besides ``NEW_JOB_FIELDS``, set by the statement: held at
        once when its task or queue (``task`` and ``queue``, as the statement reads them) is
        paused."""
        return {
            "state": self.scheduled_or_held(task, queue),
            "attempts": sa.literal_column("0", sa.Integer),
            "created_at": self._now,
            "updated_at": self._now,
        }

    def _add_jobs(self, dialect: Dialect) -> sa.Insert:
        """``INSERT … SELECT … ON CONFLICT (id) DO NOTHING RETURNING id`` for one page of jobs.

        PostgreSQL takes the page as one array per column unnested into rows: a short statement that
        the driver caches and prepares, with nothing to parse per row, which is about twice as
        fast as a multi-row VALUES list with four parameters per row. The arrays travel in the
        driver's binary format (``sql/driver.py``'s ``ArrayInsert``): its text format escapes every
        element with a regular expression. SQLite has no arrays and reads a VALUES list, one row
        of parameters per job (``sql/driver.py``'s ``ValuesInsert`` repeats this statement's one
        row). Either way the statement's columns (the pause check among them) are written once,
        not once per row: an uncorrelated subquery is read once per statement.
        """
        jobs = self._jobs
        rows = self._arrays_as_rows() if dialect.new_jobs_as_arrays else self._row_of_values()
        fixed = self._new_job_columns(rows.c.task, rows.c.queue)
        selected = sa.select(*(rows.c[name] for name in NEW_JOB_FIELDS), *fixed.values())
        if not dialect.new_jobs_as_arrays:
            # SQLite reads "ON CONFLICT" after a SELECT as a join's ON without a WHERE before it
            selected = selected.where(sa.true())
        insert = dialect.insert(jobs).from_select([*NEW_JOB_FIELDS, *fixed], selected)
        return insert.on_conflict_do_nothing(index_elements=[jobs.c.id]).returning(jobs.c.id)

    def _arrays_as_rows(self) -> Any:
        """``unnest(:ids, :tasks, …) AS new_jobs(id, task, …)``: one array parameter per column
        of ``NEW_JOB_FIELDS`` (PostgreSQL)."""
        jobs = self._jobs
        arrays = (
            sa.bindparam(f"{name}s", type_=ARRAY(jobs.c[name].type)) for name in NEW_JOB_FIELDS
        )
        return sa.func.unnest(*arrays).table_valued(*NEW_JOB_FIELDS).render_derived(name="new_jobs")

    def _row_of_values(self) -> Any:
        """``(SELECT column1 AS id, … FROM (VALUES (:id, …))) AS new_jobs`` (SQLite, which names
        a VALUES list's columns ``column1``, ``column2``, … and takes no list of names for them):
        one row of parameters named as ``NEW_JOB_FIELDS``, which ``ValuesInsert`` repeats."""
        jobs = self._jobs
        named = ", ".join(f"column{n} AS {name}" for n, name in enumerate(NEW_JOB_FIELDS, 1))
        row = ", ".join(f":{name}" for name in NEW_JOB_FIELDS)
        return (
            sa.text(f"SELECT {named} FROM (VALUES ({row}))")
            .bindparams(*(sa.bindparam(name, type_=jobs.c[name].type) for name in NEW_JOB_FIELDS))
            .columns(*(sa.column(name, jobs.c[name].type) for name in NEW_JOB_FIELDS))
            .subquery("new_jobs")
        )

    def _add_job(self, dialect: Dialect) -> sa.Insert:
        """``add_jobs`` for exactly one job, one plain row of parameters named as
        ``NEW_JOB_FIELDS``: a client storing a job per call runs it on the driver as it is (see
        ``SQLPlumbing._driver_rows``), with no arrays to build, bind or unnest for one row."""
        jobs = self._jobs
        # every column's parameter is named here, so the pause check may read the task and queue
        # parameters again (SQLAlchemy refuses a column's own name in a VALUES it fills itself)
        row = {name: sa.bindparam(name, type_=jobs.c[name].type) for name in NEW_JOB_FIELDS}
        fixed = self._new_job_columns(row["task"], row["queue"])
        insert = dialect.insert(jobs).values({**row, **fixed})
        return insert.on_conflict_do_nothing(index_elements=[jobs.c.id]).returning(jobs.c.id)

    def _build_claims(self) -> None:
        """Reading the due set, and taking jobs out of it under the caller's lock lease."""
        jobs, now = self._jobs, self._now
        scheduled = state_is(jobs.c.state, JobState.SCHEDULED)
        due_first = (jobs.c.due_at, jobs.c.id)
        limit = sa.bindparam("limit", type_=sa.Integer)
        self.fetch_due = (
            sa.select(jobs.c.id).where(scheduled, jobs.c.due_at <= now).order_by(*due_first)
        ).limit(limit)
        self.next_due_at = sa.select(sa.func.min(jobs.c.due_at)).where(scheduled)
        # Two independent minimums in one statement, each read from the end of its own index
        # (the due index, the claim-lease index); NULL where that set is empty.
        claimed = state_is(jobs.c.state, JobState.CLAIMED)
        self.next_work_at = sa.select(
            self.next_due_at.scalar_subquery().label("due_at"),
            sa.select(sa.func.min(jobs.c.lease_until))
            .where(claimed)
            .scalar_subquery()
            .label("lease_until"),
        )
        claimable = sa.select(jobs.c.id).where(
            scheduled, jobs.c.due_at <= now, self._lock_is_held()
        )
        one = claimable.where(jobs.c.id == sa.bindparam("job_id", type_=sa.String))
        batch = claimable.order_by(*due_first).limit(limit)
        self.claim = self._claim(
            jobs.c.id == one.with_for_update(skip_locked=True).scalar_subquery()
        )
        self.claim_due = self._claim(jobs.c.id.in_(batch.with_for_update(skip_locked=True)))

    def _build_settlements(self, dialect: Dialect) -> None:
        """Ending a claim matches its fencing token, so a claim that was recovered is refused."""
        jobs, now = self._jobs, self._now
        claimed = state_is(jobs.c.state, JobState.CLAIMED)
        owned = (
            dialect.ids_in(jobs.c.id),
            claimed,
            jobs.c.claim_token == sa.bindparam("held_token", type_=sa.BigInteger),
        )
        error = sa.func.coalesce(sa.bindparam("error", type_=sa.Text), jobs.c.last_error)
        # every settling ends the claim's lease; each adds its own columns to this SET clause
        settle = (
            sa.update(jobs)
            .where(*owned)
            .returning(jobs.c.id)
            .values(updated_at=now, lease_until=None)
        )
        # a job that ended needs its broker message no more
        self.mark_enqueued = settle.values(state=state_literal(JobState.ENQUEUED), envelope=None)
        # a claim given back is held instead when a pause came meanwhile (so are recovered ones)
        given_back = self.scheduled_or_held(jobs.c.task, jobs.c.queue)
        self.unclaim = settle.values(state=given_back, claim_token=None, last_error=error)
        self.expire = settle.values(
            state=state_literal(JobState.EXPIRED), last_error=error, envelope=None
        )
        # a job that cannot be sent: due again later on its own, or set aside for good
        self.back_off = settle.values(
            state=given_back,
            claim_token=None,
            last_error=error,
            due_at=now + sa.bindparam("delay", type_=sa.Double),
        )
        self.fail = settle.values(
            state=state_literal(JobState.FAILED), claim_token=None, last_error=error, envelope=None
        )
        limit = sa.bindparam("limit", type_=sa.Integer)
        lapsed = sa.select(jobs.c.id).where(claimed, jobs.c.lease_until < now).limit(limit)
        self.recover = (
            sa.update(jobs)
            .where(jobs.c.id.in_(lapsed.with_for_update(skip_locked=True)))
            .values(
                state=given_back,
                updated_at=now,
                lease_until=None,
                claim_token=None,
                last_error=RECOVERED_REASON,
            )
        )

    def _lock_is_held(self) -> sa.Exists:
        """The fence: true only while the caller's lease is the lock's current, unexpired one.

        It is uncorrelated, so the planner evaluates it once, before touching any job row.
        """
        locks = self._locks
        return sa.exists().where(
            locks.c.name == sa.bindparam("lock_name", type_=sa.String),
            locks.c.owner == sa.bindparam("lock_owner", type_=sa.Text),
            locks.c.token == sa.bindparam("lock_token", type_=sa.BigInteger),
            locks.c.expires_at > self._now,
        )

    def _claim(self, which: sa.ColumnElement[bool]) -> sa.Update:
        jobs, now = self._jobs, self._now
        return (
            sa.update(jobs)
            .where(which)
            .values(
                state=state_literal(JobState.CLAIMED),
                claim_token=sa.bindparam("lock_token", type_=sa.BigInteger),
                lease_until=now + sa.bindparam("lease", type_=sa.Double),
                attempts=jobs.c.attempts + 1,
                updated_at=now,
            )
            .returning(*self.claim_columns)
        )

    # -- management -------------------------------------------------------------------------

    def _build_management(self) -> None:
        jobs, now = self._jobs, self._now
        by_id = jobs.c.id == sa.bindparam("job_id", type_=sa.String)
        scheduled = state_is(jobs.c.state, JobState.SCHEDULED)
        self.get_job = sa.select(*self.record_columns).where(by_id)
        listing = (
            sa.select(*self.record_columns)
            .order_by(jobs.c.due_at, jobs.c.id)
            .limit(sa.bindparam("limit", type_=sa.Integer))
            .offset(sa.bindparam("offset", type_=sa.Integer))
        )
        self.list_all = listing
        self.list_by_state = {
            state: listing.where(state_is(jobs.c.state, state)) for state in JobState
        }
        held = state_is(jobs.c.state, JobState.HELD)
        self.cancel = (
            sa.update(jobs)
            .where(by_id, sa.or_(scheduled, held))
            .values(state=state_literal(JobState.CANCELLED), updated_at=now)
        )
        # updated_at records state changes only, so moving the due time leaves it alone; a
        # failed job is queued again (held, when paused), its attempts counted afresh. A held
        # job stays held: a pause holds it still (no pause, no held job: see sql/pauses.py).
        failed = state_is(jobs.c.state, JobState.FAILED)
        self.reschedule = (
            sa.update(jobs)
            .where(by_id, sa.or_(scheduled, failed, held))
            .values(
                due_at=sa.bindparam("new_due_at", type_=sa.Double),
                attempts=sa.case((failed, 0), else_=jobs.c.attempts),
                updated_at=sa.case((failed, now), else_=jobs.c.updated_at),
                state=self.scheduled_or_held(jobs.c.task, jobs.c.queue),
            )
        )
        self.count_by_state = sa.select(jobs.c.state, sa.func.count().label("jobs")).group_by(
            jobs.c.state
        )
