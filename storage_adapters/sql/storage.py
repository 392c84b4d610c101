"""The ``Storage`` contract in SQLAlchemy Core, shared by the PostgreSQL and SQLite adapters.

One module per contract family, each a class on the plumbing of ``sql/plumbing.py``
(connections, transactions in autocommit mode, driver errors as the contract's errors):
``sql/jobs.py``, ``sql/release.py``, ``sql/locks.py``, ``sql/recurring.py``,
``sql/retention.py``, ``sql/instances.py``, ``sql/browse.py``, ``sql/outcomes.py``,
``sql/pauses.py``, ``sql/rate_limits.py``, ``sql/unique.py`` and ``sql/calendars.py``. This
module holds what makes them one storage: set-up and migrations, the shard count, the clock,
closing and dropping.
"""

from __future__ import annotations

import sqlalchemy as sa

from storage_adapters.sharding import SHARDS_META, check_shard_count
from storage_adapters.sql.browse import SQLBrowseStore
from storage_adapters.sql.calendars import SQLCalendarStore
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.instances import SQLInstanceStore
from storage_adapters.sql.jobs import SQLJobStore
from storage_adapters.sql.locks import SQLLockStore
from storage_adapters.sql.outcomes import SQLOutcomeStore
from storage_adapters.sql.pauses import SQLPauseStore
from storage_adapters.sql.plumbing import ADD_JOBS_PAGE_SIZE
from storage_adapters.sql.rate_limits import SQLRateLimitStore
from storage_adapters.sql.recurring import SQLRecurringStore
from storage_adapters.sql.release import SQLReleaseStore
from storage_adapters.sql.retention import SQLRetentionStore
from storage_adapters.sql.tables import META_SINCE, migrate
from storage_adapters.sql.unique import SQLUniqueJobStore

__all__ = ["ADD_JOBS_PAGE_SIZE", "SQLStorage"]


class SQLStorage(
    SQLJobStore,
    SQLReleaseStore,
    SQLLockStore,
    SQLRecurringStore,
    SQLRetentionStore,
    SQLInstanceStore,
    SQLBrowseStore,
    SQLOutcomeStore,
    SQLPauseStore,
    SQLRateLimitStore,
    SQLUniqueJobStore,
    SQLCalendarStore,
):
    """One prefix's jobs, locks and recurring jobs in an SQL database reached through ``engine``.

    Subclasses only build the engine and describe their ``Dialect``; every behaviour is here and
    in the classes below it.
    """

    # -- set-up and clock -------------------------------------------------------------------

    @rerun_if_ended_idle
    def setup(self) -> None:
        with self._transaction() as conn:
            self._dialect.serialise_schema_changes(conn, self._prefix)
            version = migrate(conn, self._tables, self._dialect.name, self._dialect.now)
        if version >= META_SINCE:  # (a test replays an older release's set-up without it)
            check_shard_count(self, self.expected_shards, self._prefix)

    def exists(self) -> bool:
        """Whether ``setup()`` ever ran under this prefix (its jobs table exists); reads only."""
        jobs = self._tables.jobs
        with self._connection() as conn:  # a server that is down: the contract's error
            return bool(sa.inspect(conn).has_table(jobs.name, schema=jobs.schema))

    def stored_shard_count(self) -> int | None:
        """The shard count recorded for this prefix (``None``: never recorded, one shard)."""
        meta = self._tables.meta
        with self._connection() as conn:  # a read: a store never set up has no record
            if not sa.inspect(conn).has_table(meta.name, schema=meta.schema):
                return None
        value = self._scalar(sa.select(meta.c.value).where(meta.c.name == SHARDS_META))
        return None if value is None else int(value)

    @rerun_if_ended_idle
    def store_shard_count(self, shards: int) -> int:
        """Record ``shards`` unless a count is recorded already; return the recorded one."""
        meta = self._tables.meta
        with self._transaction() as conn:
            self._dialect.serialise_schema_changes(conn, self._prefix)  # one writer at a time
            query = sa.select(meta.c.value).where(meta.c.name == SHARDS_META)
            stored = conn.execute(query).scalar()
            if stored is None:
                conn.execute(meta.insert().values(name=SHARDS_META, value=str(shards)))
                return shards
        return int(stored)

    def now(self) -> float:
        return float(self._scalar(self._sql.now))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_engine:
                self._held.close_all()
                self._engine.dispose()

    @rerun_if_ended_idle
    def drop(self) -> None:
        with self._transaction() as conn:
            tables = self._tables
            every = (
                tables.jobs,
                tables.locks,
                tables.recurring,
                tables.instances,
                tables.meta,
                tables.outcomes,
                tables.outcome_counts,
                tables.pauses,
                tables.rate_limits,
                tables.calendars,
            )
            for table in (*every, tables.schema_version):
                conn.execute(sa.schema.DropTable(table, if_exists=True))
