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

from .base import JobState
from .checks import RECOVERED_REASON
from .sql_tables import Tables

__all__ = ["NEW_JOB_FIELDS", "Dialect", "Statements", "state_is"]

NEW_JOB_FIELDS = ("id", "task", "payload", "due_at")

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


def state_is(column: sa.ColumnElement[Any], state: JobState) -> sa.ColumnElement[bool]:
    return column == _literal(state)


def _literal(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)


class Statements:
    """The Core statements of one prefix; bound parameter names are the contract with callers."""

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
        )
        self.add_jobs = self._add_jobs(dialect)
        self._build_claims()
        self._build_settlements(dialect)
        self._build_management()
        self._build_locks(dialect)

    # -- release ----------------------------------------------------------------------------

    def _add_jobs(self, dialect: Dialect) -> sa.Insert:
        """``INSERT … ON CONFLICT (id) DO NOTHING RETURNING id`` for one page of new jobs.

        PostgreSQL takes the page as four arrays unnested into rows: a short statement that
        the driver caches and prepares, with nothing to parse per row, which is about twice as
        fast as a multi-row VALUES list with four parameters per row. SQLite has no arrays and
        gets the VALUES list, which SQLAlchemy builds from one parameter set per job.
        """
        jobs = self._jobs
        fixed = {
            "state": _literal(JobState.SCHEDULED),
            "attempts": sa.literal(0, sa.Integer),
            "created_at": self._now,
            "updated_at": self._now,
        }
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
        settle = sa.update(jobs).where(*owned).returning(jobs.c.id)
        self.mark_enqueued = settle.values(
            state=_literal(JobState.ENQUEUED), updated_at=now, lease_until=None
        )
        self.unclaim = settle.values(
            state=_literal(JobState.SCHEDULED),
            updated_at=now,
            lease_until=None,
            claim_token=None,
            last_error=error,
        )
        self.expire = settle.values(
            state=_literal(JobState.EXPIRED), updated_at=now, lease_until=None, last_error=error
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
        # updated_at records state changes only, so moving the due time leaves it alone.
        self.reschedule = (
            sa.update(jobs)
            .where(by_id, scheduled)
            .values(due_at=sa.bindparam("new_due_at", type_=sa.Double))
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
