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
from storage_adapters.sql.tables import Tables

__all__ = ["NEW_JOB_FIELDS", "JobStatements"]

NEW_JOB_FIELDS = ("id", "task", "payload", "due_at", "envelope")


class JobStatements:
    """The Core statements of one prefix's jobs; bound parameter names are the contract with
    callers."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        self._jobs = jobs = tables.jobs
        self._locks = tables.locks
        self._now = dialect.now
        self.now = sa.select(dialect.now)
        self.record_columns = (
            *(jobs.c[name] for name in ("id", "task", "payload", "due_at", "state", "attempts")),
            *(jobs.c[name] for name in ("created_at", "updated_at", "last_error")),
        )
        self.claim_columns = (
            jobs.c.id,
            jobs.c.task,
            jobs.c.payload,
            jobs.c.due_at,
            jobs.c.attempts,
            jobs.c.envelope,
        )
        self.add_jobs = self._add_jobs(dialect)
        self.add_job = self._add_job(dialect)
        self._build_claims()
        self._build_settlements(dialect)
        self._build_management()

    # -- release ----------------------------------------------------------------------------

    def _new_job_columns(self) -> dict[str, sa.ColumnElement[Any]]:
        """What a new job's row holds besides ``NEW_JOB_FIELDS``, set by the statement."""
        return {
            "state": state_literal(JobState.SCHEDULED),
            "attempts": sa.literal(0, sa.Integer),
            "created_at": self._now,
            "updated_at": self._now,
        }

    def _add_jobs(self, dialect: Dialect) -> sa.Insert:
        """``INSERT … ON CONFLICT (id) DO NOTHING RETURNING id`` for one page of new jobs.

        PostgreSQL takes the page as one array per column unnested into rows: a short statement that
        the driver caches and prepares, with nothing to parse per row, which is about twice as
        fast as a multi-row VALUES list with four parameters per row. The arrays travel in the
        driver's binary format (``sql/driver.py``'s ``ArrayInsert``): its text format escapes every
        element with a regular expression. SQLite has no arrays and gets the VALUES list, which
        SQLAlchemy builds from one parameter set per job.
        """
        jobs = self._jobs
        fixed = self._new_job_columns()
        if dialect.new_jobs_as_arrays:
            rows = (
                sa.func.unnest(
                    *(
                        sa.bindparam(f"{name}s", type_=ARRAY(jobs.c[name].type))
                        for name in NEW_JOB_FIELDS
                    )
                )
                .table_valued(*NEW_JOB_FIELDS)
                .render_derived(name="new_jobs")
            )
            insert = dialect.insert(jobs).from_select(
                [*NEW_JOB_FIELDS, *fixed], sa.select(*rows.c, *fixed.values())
            )
        else:
            insert = dialect.insert(jobs).values(fixed)
        return insert.on_conflict_do_nothing(index_elements=[jobs.c.id]).returning(jobs.c.id)

    def _add_job(self, dialect: Dialect) -> sa.Insert:
        """``add_jobs`` for exactly one job, one plain row of parameters named as
        ``NEW_JOB_FIELDS``: a client storing a job per call runs it on the driver as it is (see
        ``SQLPlumbing._driver_rows``), with no arrays to build, bind or unnest for one row."""
        jobs = self._jobs
        row = {name: sa.bindparam(name, type_=jobs.c[name].type) for name in NEW_JOB_FIELDS}
        insert = dialect.insert(jobs).values({**row, **self._new_job_columns()})
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
        self.unclaim = settle.values(
            state=state_literal(JobState.SCHEDULED), claim_token=None, last_error=error
        )
        self.expire = settle.values(
            state=state_literal(JobState.EXPIRED), last_error=error, envelope=None
        )
        # a job that cannot be sent: due again later on its own, or set aside for good
        self.back_off = settle.values(
            state=state_literal(JobState.SCHEDULED),
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
                state=state_literal(JobState.SCHEDULED),
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
        self.cancel = (
            sa.update(jobs)
            .where(by_id, scheduled)
            .values(state=state_literal(JobState.CANCELLED), updated_at=now)
        )
        # updated_at records state changes only, so moving the due time leaves it alone; a
        # failed job is queued again, its attempts counted afresh.
        failed = state_is(jobs.c.state, JobState.FAILED)
        self.reschedule = (
            sa.update(jobs)
            .where(by_id, sa.or_(scheduled, failed))
            .values(
                due_at=sa.bindparam("new_due_at", type_=sa.Double),
                attempts=sa.case((failed, 0), else_=jobs.c.attempts),
                updated_at=sa.case((failed, now), else_=jobs.c.updated_at),
                state=state_literal(JobState.SCHEDULED),
            )
        )
        self.count_by_state = sa.select(jobs.c.state, sa.func.count().label("jobs")).group_by(
            jobs.c.state
        )
