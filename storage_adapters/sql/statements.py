"""Every statement of the SQL adapters, built once per prefix from the few dialect differences.

Building them up front lets SQLAlchemy compile each once and lets the driver prepare them; each
operation then costs one statement. Three rules shape them:

* "now" is an SQL expression evaluated by the server inside the statement (``Dialect.now``), never
  a value computed on the client, so hosts with skewed clocks agree and a statement that waited
  for a lock does not act on a stale time.
* State values are SQL literals, not bound parameters: a prepared generic plan cannot prove that
  ``state = $1`` implies the ``state = 'scheduled'`` of a partial index, a literal can.
* Claims lock their rows with ``FOR UPDATE SKIP LOCKED`` (dropped by the SQLite compiler, where
  the single writer serialises claims instead), so concurrent claimers never wait on each other
  and never take the same job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from storage_adapters.checks.values import RECOVERED_REASON
from storage_adapters.records import JobState, SaveMode
from storage_adapters.sql.tables import Tables

__all__ = [
    "INITIAL_RECURRING_VERSION",
    "NEW_JOB_FIELDS",
    "RECURRING_FIELDS",
    "Dialect",
    "Statements",
    "state_is",
]

NEW_JOB_FIELDS = ("id", "task", "payload", "due_at", "envelope")
#: The columns of the recurring table in ``RecurringRecord`` field order.
RECURRING_FIELDS = (
    *("id", "task", "payload", "schedule", "enabled", "next_run_at", "last_run_at", "history"),
    *("version", "created_at", "updated_at"),
)
#: A new recurring job's version; every later write adds one, so only a creation returns it.
INITIAL_RECURRING_VERSION = 1

UpsertInsert = postgresql.Insert | sqlite.Insert


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL backends; everything else is shared.

    ``ids_in(column)`` matches ``column`` against the single bound parameter ``ids``, whose value
    ``bind_ids`` prepares: one parameter whatever the count keeps the statement text (and so its
    prepared plan) fixed, and avoids the driver's limit on the number of parameters.
    """

    name: str
    label: str
    now: sa.ColumnElement[float]
    begin: str
    new_jobs_as_arrays: bool
    insert: Callable[[sa.Table], UpsertInsert]
    ids_in: Callable[[sa.ColumnElement[str]], sa.ColumnElement[bool]]
    bind_ids: Callable[[Sequence[str]], object]
    is_unavailable: Callable[[DBAPIError], bool]
    serialise_schema_changes: Callable[[Connection, str], None]
    #: Run in the transaction of a read of the due set, and of a chunk's claim by ids ("" for
    #: none); see sql/postgresql.py.
    due_scan_settings: str = ""


def state_is(column: sa.ColumnElement[Any], state: JobState) -> sa.ColumnElement[bool]:
    return column == _literal(state)


def _literal(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)


class Statements:
    """The Core statements of one prefix; bound parameter names are the contract with callers."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        self._jobs = jobs = tables.jobs
        self._locks = tables.locks
        self._recurring = tables.recurring
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
        self._build_locks(dialect)
        self._build_recurring(dialect)

    # -- release ----------------------------------------------------------------------------

    def _new_job_columns(self) -> dict[str, sa.ColumnElement[Any]]:
        """What a new job's row holds besides ``NEW_JOB_FIELDS``, set by the statement."""
        return {
            "state": _literal(JobState.SCHEDULED),
            "attempts": sa.literal(0, sa.Integer),
            "created_at": self._now,
            "updated_at": self._now,
        }

    def _add_jobs(self, dialect: Dialect) -> sa.Insert:
        """``INSERT … ON CONFLICT (id) DO NOTHING RETURNING id`` for one page of new jobs.

        PostgreSQL takes the page as one array per column unnested into rows: a short statement that
        the driver caches and prepares, with nothing to parse per row, which is about twice as
        fast as a multi-row VALUES list with four parameters per row. The arrays travel in the
        driver's binary format (``sql_plumbing.ArrayInsert``): its text format escapes every
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
        self.mark_enqueued = settle.values(state=_literal(JobState.ENQUEUED), envelope=None)
        self.unclaim = settle.values(
            state=_literal(JobState.SCHEDULED), claim_token=None, last_error=error
        )
        self.expire = settle.values(
            state=_literal(JobState.EXPIRED), last_error=error, envelope=None
        )
        # a job that cannot be sent: due again later on its own, or set aside for good
        self.back_off = settle.values(
            state=_literal(JobState.SCHEDULED),
            claim_token=None,
            last_error=error,
            due_at=now + sa.bindparam("delay", type_=sa.Double),
        )
        self.fail = settle.values(
            state=_literal(JobState.FAILED), claim_token=None, last_error=error, envelope=None
        )
        limit = sa.bindparam("limit", type_=sa.Integer)
        lapsed = sa.select(jobs.c.id).where(claimed, jobs.c.lease_until < now).limit(limit)
        self.recover = (
            sa.update(jobs)
            .where(jobs.c.id.in_(lapsed.with_for_update(skip_locked=True)))
            .values(
                state=_literal(JobState.SCHEDULED),
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
                state=_literal(JobState.CLAIMED),
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
            .values(state=_literal(JobState.CANCELLED), updated_at=now)
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
                state=_literal(JobState.SCHEDULED),
            )
        )
        self.count_by_state = sa.select(jobs.c.state, sa.func.count().label("jobs")).group_by(
            jobs.c.state
        )

    # -- locks ------------------------------------------------------------------------------

    def _build_locks(self, dialect: Dialect) -> None:
        locks, now = self._locks, self._now
        name = locks.c.name == sa.bindparam("lock_name", type_=sa.String)
        held_by = (
            name,
            locks.c.owner == sa.bindparam("lock_owner", type_=sa.Text),
            locks.c.token == sa.bindparam("lock_token", type_=sa.BigInteger),
            locks.c.expires_at > now,
        )
        new_expiry = now + sa.bindparam("lease", type_=sa.Double)
        insert = dialect.insert(locks).values(
            name=sa.bindparam("lock_name", type_=sa.String),
            owner=sa.bindparam("lock_owner", type_=sa.Text),
            token=1,
            expires_at=new_expiry,
        )
        # A lock row is never deleted, so its token only grows: every take-over counts up.
        self.acquire_lock = insert.on_conflict_do_update(
            index_elements=[locks.c.name],
            set_={
                "owner": insert.excluded.owner,
                "token": locks.c.token + 1,
                "expires_at": insert.excluded.expires_at,
            },
            where=locks.c.expires_at <= now,
        ).returning(locks.c.token, locks.c.expires_at)
        self.renew_lock = (
            sa.update(locks).where(*held_by).values(expires_at=new_expiry)
        ).returning(locks.c.expires_at)
        self.release_lock = sa.update(locks).where(*held_by).values(expires_at=now)
        self.lock_holder = sa.select(locks.c.owner, locks.c.token, locks.c.expires_at).where(
            name, locks.c.expires_at > now
        )

    # -- recurring jobs ---------------------------------------------------------------------

    def _build_recurring(self, dialect: Dialect) -> None:
        """Every write bumps ``version`` in the statement itself, so a compare-and-set on it
        (``fire_recurring``) refuses to act on a state that changed since it was read."""
        rec, now = self._recurring, self._now
        columns = [rec.c[name] for name in RECURRING_FIELDS]
        by_id = rec.c.id == sa.bindparam("recurring_id", type_=sa.String)
        limit = sa.bindparam("limit", type_=sa.Integer)
        self.get_recurring = sa.select(*columns).where(by_id)
        self.list_recurring = (
            sa.select(*columns)
            .order_by(rec.c.id)
            .limit(limit)
            .offset(sa.bindparam("offset", type_=sa.Integer))
        )
        self.count_recurring = sa.select(sa.func.count()).select_from(rec)
        self.remove_recurring = sa.delete(rec).where(by_id)
        # The plain boolean column, not "enabled IS true": PostgreSQL proves the partial index's
        # "WHERE enabled AND next_run_at IS NOT NULL" from it (SQLite renders "enabled = 1").
        self.fetch_due_recurring = (
            sa.select(*columns)
            .where(rec.c.enabled, rec.c.next_run_at <= now)
            .order_by(rec.c.next_run_at, rec.c.id)
            .limit(limit)
        )
        self.next_recurring_at = (
            sa.select(rec.c.next_run_at)
            .where(rec.c.enabled, rec.c.next_run_at.is_not(None))
            .order_by(rec.c.next_run_at)
            .limit(1)
        )
        bump = {"version": rec.c.version + 1, "updated_at": now}
        self.set_recurring_enabled = (
            sa.update(rec)
            .where(by_id)
            .values(
                enabled=sa.bindparam("new_enabled", type_=sa.Boolean),
                next_run_at=sa.bindparam("new_next_run_at", type_=sa.Double),
                **bump,
            )
        )
        self.fire_recurring = (
            sa.update(rec)
            .where(
                by_id,
                rec.c.version == sa.bindparam("expected_version", type_=sa.BigInteger),
                self._lock_is_held(),
            )
            .values(
                next_run_at=sa.bindparam("new_next_run_at", type_=sa.Double),
                last_run_at=sa.bindparam("new_last_run_at", type_=sa.Double),
                history=sa.bindparam("new_history", type_=sa.Text),
                **bump,
            )
            .returning(rec.c.id)
        )
        # A trigger: the same compare-and-set, without the lock and leaving next_run_at alone.
        self.trigger_recurring = (
            sa.update(rec)
            .where(by_id, rec.c.version == sa.bindparam("expected_version", type_=sa.BigInteger))
            .values(
                last_run_at=sa.bindparam("new_last_run_at", type_=sa.Double),
                history=sa.bindparam("new_history", type_=sa.Text),
                **bump,
            )
            .returning(rec.c.id)
        )
        self.save_recurring = self._save_recurring(dialect, by_id, bump)

    def _save_recurring(
        self,
        dialect: Dialect,
        by_id: sa.ColumnElement[bool],
        bump: dict[str, sa.ColumnElement[Any]],
    ) -> dict[SaveMode, sa.Insert | sa.Update]:
        """One statement per mode, each returning the written row's version, or no row when the
        mode refuses (create: the id exists; update: it does not). A row whose version is
        ``INITIAL_RECURRING_VERSION`` was created: a conflict or an update always bumps it."""
        rec, now = self._recurring, self._now
        replaced = {
            name: sa.bindparam(f"new_{name}", type_=rec.c[name].type)
            for name in ("task", "payload", "schedule", "enabled", "next_run_at")
        }
        insert = dialect.insert(rec).values(
            id=sa.bindparam("recurring_id", type_=sa.String),
            **replaced,
            last_run_at=None,
            history="[]",
            version=INITIAL_RECURRING_VERSION,
            created_at=now,
            updated_at=now,
        )
        created = insert.on_conflict_do_nothing(index_elements=[rec.c.id])
        upserted = insert.on_conflict_do_update(
            index_elements=[rec.c.id],
            set_={**{name: insert.excluded[name] for name in replaced}, **bump},
        )
        updated = sa.update(rec).where(by_id).values(**replaced, **bump)
        return {
            "create": created.returning(rec.c.version),
            "update": updated.returning(rec.c.version),
            "upsert": upserted.returning(rec.c.version),
        }
