"""Every statement of the SQL adapters, built once per prefix from the few dialect differences.

Building them up front lets SQLAlchemy compile each once and lets the driver prepare them; each
operation then costs one statement. The jobs' statements are ``sql/job_statements.py``; the lock's
and the recurring jobs' are here. Three rules shape them all:

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

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from storage_adapters.records import SaveMode
from storage_adapters.sql.dialect import Dialect
from storage_adapters.sql.job_statements import JobStatements
from storage_adapters.sql.pause_statements import PauseStatements
from storage_adapters.sql.rate_limit_statements import RateLimitStatements
from storage_adapters.sql.tables import Tables
from storage_adapters.sql.unique_statements import UniqueStatements

__all__ = ["INITIAL_RECURRING_VERSION", "RECURRING_FIELDS", "SAVED_ARRAYS", "Statements"]

#: The columns of the recurring table in ``RecurringRecord`` field order.
RECURRING_FIELDS = (
    *("id", "task", "payload", "schedule", "enabled", "next_run_at", "last_run_at", "history"),
    *("version", "created_at", "updated_at", "pause_note", "paused_by", "paused_at"),
)
#: The columns of a recurring job's pause: why, who, since when (``NULL`` while enabled).
PAUSE_COLUMNS = ("pause_note", "paused_by", "paused_at")
#: The columns a save writes, each an array parameter ``saved_<name>`` of
#: ``Statements.save_recurring_many``.
SAVED_ARRAYS = ("id", "task", "payload", "schedule", "enabled", "next_run_at")
#: A new recurring job's version; every later write adds one, so only a creation returns it.
INITIAL_RECURRING_VERSION = 1


class Statements(JobStatements):
    """The Core statements of one prefix: the jobs' (``JobStatements``), the lock's and the
    recurring jobs', the pauses' (``pauses``), the rate limits' (``rate_limits``) and the unique
    jobs' (``unique``); bound parameter names are the contract with callers."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        super().__init__(tables, dialect)
        self._recurring = tables.recurring
        self._build_locks(dialect)
        self._build_recurring(dialect)
        self.pauses = PauseStatements(tables, dialect)
        self.rate_limits = RateLimitStatements(tables, dialect)
        self.unique = UniqueStatements(tables, dialect, self._new_job_columns)

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
            .offset(sa.bindparam("offset", type_=sa.Integer))
        )
        self.fetch_recurring_until = (
            sa.select(*columns)
            .where(rec.c.enabled, rec.c.next_run_at <= sa.bindparam("until", type_=sa.Double))
            .order_by(rec.c.next_run_at, rec.c.id)
            .limit(limit)
            .offset(sa.bindparam("offset", type_=sa.Integer))
        )
        self.next_recurring_at = (
            sa.select(rec.c.next_run_at)
            .where(rec.c.enabled, rec.c.next_run_at.is_not(None))
            .order_by(rec.c.next_run_at)
            .limit(1)
        )
        bump = {"version": rec.c.version + 1, "updated_at": now}
        enabled = sa.bindparam("new_enabled", type_=sa.Boolean)
        # a pause begins now unless it is paused already; a resume ends it
        since = sa.case((rec.c.enabled, now), else_=sa.func.coalesce(rec.c.paused_at, now))
        expected = sa.bindparam("expected_version", type_=sa.BigInteger)
        self.set_recurring_enabled = (
            sa.update(rec)
            .where(by_id, sa.or_(expected.is_(None), rec.c.version == expected))
            .values(
                enabled=enabled,
                next_run_at=sa.bindparam("new_next_run_at", type_=sa.Double),
                pause_note=sa.bindparam("new_pause_note", type_=sa.Text),
                paused_by=sa.bindparam("new_paused_by", type_=sa.String),
                paused_at=sa.case((sa.not_(enabled), since), else_=sa.null()),
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
        self.fire_recurring_many = self._fire_by_arrays(dialect)
        # Which of a chunk's recurring jobs exist, their rows locked (PostgreSQL) until the
        # chunk's save commits; SQLite's BEGIN IMMEDIATE holds the whole database instead.
        existing = sa.select(rec.c.id).where(dialect.ids_in(rec.c.id))
        self.recurring_ids_in = existing  # the same read, without the lock
        self.existing_recurring = (
            existing.with_for_update() if dialect.new_jobs_as_arrays else existing
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
        self.save_recurring_many = self._save_by_arrays(dialect, bump)

    def _fire_by_arrays(self, dialect: Dialect) -> sa.Update | None:
        """``fire_recurring`` for a whole chunk in one statement, on PostgreSQL (whose arrays
        carry the chunk as one parameter per column): returns the ids whose compare-and-set
        held. ``None`` on SQLite, where a statement costs no round trip and each runs alone."""
        if not dialect.new_jobs_as_arrays:
            return None
        rec = self._recurring
        columns = {
            "id": sa.String,
            "expected_version": sa.BigInteger,
            "next_run_at": sa.Double,
            "last_run_at": sa.Double,
            "history": sa.Text,
        }
        planned = _unnested("planned", columns)
        return (
            sa.update(rec)
            .where(
                rec.c.id == planned.c.id,
                rec.c.version == planned.c.expected_version,
                self._lock_is_held(),
            )
            .values(
                next_run_at=planned.c.next_run_at,
                last_run_at=planned.c.last_run_at,
                history=planned.c.history,
                version=rec.c.version + 1,
                updated_at=self._now,
            )
            .returning(rec.c.id)
        )

    def _save_by_arrays(
        self, dialect: Dialect, bump: dict[str, sa.ColumnElement[Any]]
    ) -> dict[SaveMode, sa.Insert | sa.Update] | None:
        """``save_recurring`` for a whole chunk in one statement per mode, on PostgreSQL (its
        arrays carry the chunk as one parameter per column), each returning the id and version
        of every row it wrote: an id missing from the answer was refused by the mode. ``None``
        on SQLite, where a statement costs no round trip."""
        if not dialect.new_jobs_as_arrays:
            return None
        rec, now = self._recurring, self._now
        columns = {name: rec.c[name].type for name in SAVED_ARRAYS}
        saved = _unnested("saved", columns)
        rows = sa.select(
            *(saved.c[name] for name in columns),
            sa.null().label("last_run_at"),
            sa.literal("[]").label("history"),
            sa.literal(INITIAL_RECURRING_VERSION, sa.BigInteger).label("version"),
            now.label("created_at"),
            now.label("updated_at"),
        )
        insert = dialect.insert(rec).from_select(
            [*columns, "last_run_at", "history", "version", "created_at", "updated_at"], rows
        )
        replaced = [name for name in columns if name != "id"]
        returned = (rec.c.id, rec.c.version)
        return {
            "create": insert.on_conflict_do_nothing(index_elements=[rec.c.id]).returning(*returned),
            "upsert": insert.on_conflict_do_update(
                index_elements=[rec.c.id],
                set_={
                    **{name: insert.excluded[name] for name in replaced},
                    **self._pause_kept(insert.excluded.enabled),
                    **bump,
                },
            ).returning(*returned),
            "update": sa.update(rec)
            .where(rec.c.id == saved.c.id)
            .values(
                **{name: saved.c[name] for name in replaced},
                **self._pause_kept(saved.c.enabled),
                **bump,
            )
            .returning(*returned),
        }

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
            set_={
                **{name: insert.excluded[name] for name in replaced},
                **self._pause_kept(insert.excluded.enabled),
                **bump,
            },
        )
        kept = self._pause_kept(replaced["enabled"])
        updated = sa.update(rec).where(by_id).values(**replaced, **kept, **bump)
        return {
            "create": created.returning(rec.c.version),
            "update": updated.returning(rec.c.version),
            "upsert": upserted.returning(rec.c.version),
        }

    def _pause_kept(self, enabled: Any) -> dict[str, sa.ColumnElement[Any]]:
        """What a save writes to the pause's columns: a save that enables the recurring job
        ends its pause (no note, who or since), one that leaves it paused keeps them."""
        rec = self._recurring
        return {
            name: sa.case((sa.not_(enabled), rec.c[name]), else_=sa.null())
            for name in PAUSE_COLUMNS
        }


def _unnested(name: str, columns: Mapping[str, Any]) -> Any:
    """``unnest(:<name>_<column>, ...) AS <name>(<column>, ...)``: one array parameter per
    column, read as the rows of a table named ``name`` (PostgreSQL)."""
    arrays: list[sa.ColumnElement[Any]] = [
        sa.cast(sa.bindparam(f"{name}_{column}", type_=sa.ARRAY(kind)), sa.ARRAY(kind))
        for column, kind in columns.items()
    ]
    return (
        sa.func.unnest(*arrays)
        .table_valued(*(sa.column(column, kind) for column, kind in columns.items()))
        .render_derived(name=name)
    )
