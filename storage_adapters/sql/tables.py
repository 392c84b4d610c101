"""The SQL schema of one prefix: Core table objects for queries, versioned migrations to build it.

Two views of the schema live here on purpose. ``build_tables`` describes the *latest* shape, for
building statements. ``MIGRATIONS`` is the history: each step is frozen DDL that is never edited
once released, so a database created by any earlier version upgrades by replaying the steps it
has not seen, recorded one row per step in ``{prefix}_schema_version``. A test checks that the
migrated database and ``build_tables`` agree. The later steps' DDL is in ``sql/migrations_late.py``.

Only the due-time indexes differ between the dialects. PostgreSQL gets partial indexes holding just
the scheduled jobs and the enabled recurring jobs that have a next run, which stay small however
many finished or held (paused) jobs or paused and ended recurring jobs the tables keep (the held
jobs have a partial index of their own, for resuming and listing them); SQLite's planner is
weaker at choosing partial indexes for ``ORDER BY … LIMIT``, so it indexes ``state``
(``enabled``) first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage_adapters.checks.instances import (
    MAX_HOST_LENGTH,
    MAX_INSTANCE_ID_LENGTH,
    MAX_VERSION_LENGTH,
)
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH
from storage_adapters.checks.unique import MAX_UNIQUE_KEY_LENGTH
from storage_adapters.errors import StorageError
from storage_adapters.records import MAX_JOB_ID_LENGTH, MAX_TASK_NAME_LENGTH, validate_prefix
from storage_adapters.sql.control_tables import build_calendars, build_rate_limits
from storage_adapters.sql.migrations_late import (
    MAX_QUEUE_NAME_LENGTH,
    STATE_LENGTH,
    v10_pauses,
    v11_unique,
    v12_rate_limits,
    v13_calendars,
    v14_recurring_pause_notes,
)

__all__ = ["MIGRATIONS", "Migration", "Tables", "build_tables", "migrate"]

MAX_LOCK_NAME_LENGTH = 100
MAX_META_NAME_LENGTH = 100
#: The schema version that added the ``meta`` table (the recorded shard count).
META_SINCE = 7
#: The longest worker host name an outcome keeps (``checks/outcomes.py`` refuses longer).
MAX_WORKER_LENGTH = 255


@dataclass(frozen=True)
class Tables:
    """The tables of one prefix, bound to their own ``MetaData`` so prefixes never mix."""

    jobs: sa.Table
    locks: sa.Table
    recurring: sa.Table
    schema_version: sa.Table
    instances: sa.Table
    meta: sa.Table
    outcomes: sa.Table
    outcome_counts: sa.Table
    pauses: sa.Table
    rate_limits: sa.Table
    calendars: sa.Table


def build_tables(prefix: str) -> Tables:
    """The latest schema under ``prefix``, which ``validate_prefix`` makes a safe identifier."""
    validate_prefix(prefix)
    metadata = sa.MetaData()
    jobs = sa.Table(
        f"{prefix}_jobs",
        metadata,
        sa.Column("id", sa.String(MAX_JOB_ID_LENGTH), primary_key=True),
        sa.Column("task", sa.String(MAX_TASK_NAME_LENGTH), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("due_at", sa.Double, nullable=False),
        sa.Column("state", sa.String(STATE_LENGTH), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.Column("claim_token", sa.BigInteger, nullable=True),
        sa.Column("lease_until", sa.Double, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        # filled when the client is given an envelope maker (``Client(envelopes=...)``); the
        # Celery integration gives one only with Redis storage, where it pays off (see
        # ``parallel_scheduler/delayed/envelopes.py``, ``stores_envelopes``)
        sa.Column("envelope", sa.Text, nullable=True),
        # the queue the job will be sent to, when the client knew it: a paused queue holds it
        sa.Column("queue", sa.String(MAX_QUEUE_NAME_LENGTH), nullable=True),
        # at most one scheduled, held or claimed job per task and key (sql/unique.py)
        sa.Column("unique_key", sa.String(MAX_UNIQUE_KEY_LENGTH), nullable=True),
        # the rate-limit slot it was given back for (sql/rate_limits.py defer): see ClaimedJob
        sa.Column("slot_at", sa.Double, nullable=True),
    )
    locks = sa.Table(
        f"{prefix}_locks",
        metadata,
        sa.Column("name", sa.String(MAX_LOCK_NAME_LENGTH), primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    recurring = sa.Table(
        f"{prefix}_recurring",
        metadata,
        sa.Column("id", sa.String(MAX_JOB_ID_LENGTH), primary_key=True),
        sa.Column("task", sa.String(MAX_TASK_NAME_LENGTH), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("schedule", sa.Text, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("next_run_at", sa.Double, nullable=True),
        sa.Column("last_run_at", sa.Double, nullable=True),
        sa.Column("history", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        # a paused one's why, who and since when (migration 14); NULL while enabled
        sa.Column("pause_note", sa.Text, nullable=True),
        sa.Column("paused_by", sa.String(MAX_PAUSED_BY_LENGTH), nullable=True),
        sa.Column("paused_at", sa.Double, nullable=True),
    )
    schema_version = sa.Table(
        f"{prefix}_schema_version",
        metadata,
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("applied_at", sa.Double, nullable=False),
    )
    instances = sa.Table(
        f"{prefix}_instances",
        metadata,
        sa.Column("id", sa.String(MAX_INSTANCE_ID_LENGTH), primary_key=True),
        sa.Column("host", sa.String(MAX_HOST_LENGTH), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("version", sa.String(MAX_VERSION_LENGTH), nullable=False),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("heartbeat_at", sa.Double, nullable=False),
        sa.Column("details", sa.Text, nullable=False),
    )
    meta = sa.Table(
        f"{prefix}_meta",
        metadata,
        sa.Column("name", sa.String(MAX_META_NAME_LENGTH), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    # what Celery workers did with each released job (sql/outcomes.py), purged with the job
    outcomes = sa.Table(
        f"{prefix}_outcomes",
        metadata,
        sa.Column("job_id", sa.String(MAX_JOB_ID_LENGTH), primary_key=True),
        sa.Column("at", sa.Double, primary_key=True),
        sa.Column("state", sa.String(STATE_LENGTH), primary_key=True),
        sa.Column("task", sa.String(MAX_TASK_NAME_LENGTH), nullable=False),
        sa.Column("worker", sa.String(MAX_WORKER_LENGTH), nullable=True),
        sa.Column("runtime", sa.Double, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("retry_id", sa.String(MAX_JOB_ID_LENGTH), nullable=True),
    )
    outcome_counts = sa.Table(
        f"{prefix}_outcome_counts",
        metadata,
        sa.Column("task", sa.String(MAX_TASK_NAME_LENGTH), primary_key=True),
        sa.Column("state", sa.String(STATE_LENGTH), primary_key=True),
        sa.Column("count", sa.BigInteger, nullable=False),
    )
    # pauses in force (sql/pauses.py): a job of a paused task or queue is held, not scheduled
    pauses = sa.Table(
        f"{prefix}_pauses",
        metadata,
        sa.Column("kind", sa.String(STATE_LENGTH), primary_key=True),
        sa.Column("name", sa.String(MAX_QUEUE_NAME_LENGTH), primary_key=True),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("paused_by", sa.String(MAX_PAUSED_BY_LENGTH), nullable=False),
        sa.Column("paused_at", sa.Double, nullable=False),
    )
    return Tables(
        jobs=jobs,
        locks=locks,
        recurring=recurring,
        schema_version=schema_version,
        instances=instances,
        meta=meta,
        outcomes=outcomes,
        outcome_counts=outcome_counts,
        pauses=pauses,
        rate_limits=build_rate_limits(prefix, metadata),
        calendars=build_calendars(prefix, metadata),
    )


@dataclass(frozen=True)
class Migration:
    """One released schema step. ``statements`` yields DDL for a prefix and a dialect name."""

    version: int
    description: str
    statements: Callable[[str, str], list[str]]


def _v1_initial(p: str, dialect: str) -> list[str]:
    due_index = (
        f"CREATE INDEX IF NOT EXISTS {p}_jobs_due ON {p}_jobs (due_at, id) "
        "WHERE state = 'scheduled'"
        if dialect == "postgresql"
        else f"CREATE INDEX IF NOT EXISTS {p}_jobs_due ON {p}_jobs (state, due_at, id)"
    )
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_jobs (
            id varchar({MAX_JOB_ID_LENGTH}) NOT NULL PRIMARY KEY,
            task varchar({MAX_TASK_NAME_LENGTH}) NOT NULL,
            payload text NOT NULL,
            due_at double precision NOT NULL,
            state varchar({STATE_LENGTH}) NOT NULL,
            attempts integer NOT NULL DEFAULT 0,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            claim_token bigint,
            lease_until double precision,
            last_error text
        )""",
        due_index,
        f"CREATE INDEX IF NOT EXISTS {p}_jobs_claim_lease ON {p}_jobs (lease_until) "
        "WHERE state = 'claimed'",
        f"""CREATE TABLE IF NOT EXISTS {p}_locks (
            name varchar({MAX_LOCK_NAME_LENGTH}) NOT NULL PRIMARY KEY,
            owner text NOT NULL,
            token bigint NOT NULL,
            expires_at double precision NOT NULL
        )""",
    ]


def _v2_recurring(p: str, dialect: str) -> list[str]:
    # next_run_at <= now implies next_run_at IS NOT NULL, so PostgreSQL proves the partial index
    # usable for the due query; ended recurring jobs (no next run) stay out of it.
    due_index = (
        f"CREATE INDEX IF NOT EXISTS {p}_recurring_due ON {p}_recurring (next_run_at, id) "
        "WHERE enabled AND next_run_at IS NOT NULL"
        if dialect == "postgresql"
        else f"CREATE INDEX IF NOT EXISTS {p}_recurring_due "
        f"ON {p}_recurring (enabled, next_run_at, id)"
    )
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_recurring (
            id varchar({MAX_JOB_ID_LENGTH}) NOT NULL PRIMARY KEY,
            task varchar({MAX_TASK_NAME_LENGTH}) NOT NULL,
            payload text NOT NULL,
            schedule text NOT NULL,
            enabled boolean NOT NULL,
            next_run_at double precision,
            last_run_at double precision,
            history text NOT NULL,
            version bigint NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL
        )""",
        due_index,
    ]


def _v3_envelope(p: str, dialect: str) -> list[str]:
    return [f"ALTER TABLE {p}_jobs ADD COLUMN envelope text"]


def _v4_instances(p: str, dialect: str) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_instances (
            id varchar({MAX_INSTANCE_ID_LENGTH}) NOT NULL PRIMARY KEY,
            host varchar({MAX_HOST_LENGTH}) NOT NULL,
            pid integer NOT NULL,
            version varchar({MAX_VERSION_LENGTH}) NOT NULL,
            started_at double precision NOT NULL,
            heartbeat_at double precision NOT NULL,
            details text NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS {p}_instances_heartbeat ON {p}_instances (heartbeat_at)",
    ]


def _v5_finished(p: str, dialect: str) -> list[str]:
    # Retention deletes the oldest finished jobs of one state in bounded batches: this index
    # hands them over oldest first without a scan (see sql/retention.py). On PostgreSQL it
    # is partial, finished jobs only, else the planner may take it for the due set's reads;
    # SQLite, which prefers whole indexes (see above), keys the due set by state first anyway.
    finished = (
        " WHERE state IN ('enqueued', 'cancelled', 'expired')" if dialect == "postgresql" else ""
    )
    return [
        f"CREATE INDEX IF NOT EXISTS {p}_jobs_finished ON {p}_jobs (state, updated_at){finished}",
    ]


def _v6_browse(p: str, dialect: str) -> list[str]:
    # The dashboard pages through jobs by (due_at, id), of one state or of all (see
    # sql/browse.py). SQLite's due index is already (state, due_at, id) over every state.
    # PostgreSQL's is (due_at, id) of scheduled jobs, which serves browsing them; the finished
    # states get a partial index of their own. Claimed jobs (the few in flight) are found by
    # their lease index and sorted: an index of their own would compete with it for the recovery
    # of claims. So the due set's reads and the recovery keep their own small indexes.
    by_state = (
        [
            f"CREATE INDEX IF NOT EXISTS {p}_jobs_state_due ON {p}_jobs (state, due_at, id) "
            "WHERE state IN ('enqueued', 'cancelled', 'expired')"
        ]
        if dialect == "postgresql"
        else []
    )
    return [*by_state, f"CREATE INDEX IF NOT EXISTS {p}_jobs_due_all ON {p}_jobs (due_at, id)"]


def _v7_meta(p: str, dialect: str) -> list[str]:
    # Facts about the store as a whole, one row each: today the shard count (see sharding.py),
    # so a process opened with another count is refused instead of missing jobs.
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_meta (
            name varchar({MAX_META_NAME_LENGTH}) NOT NULL PRIMARY KEY,
            value text NOT NULL
        )"""
    ]


def _v8_failed(p: str, dialect: str) -> list[str]:
    # Jobs set aside as failed are listed for people (the errors page, ``list --state failed``):
    # on PostgreSQL a partial index of their own, which stays as small as they are few. SQLite's
    # due index is (state, due_at, id) over every state already.
    if dialect != "postgresql":
        return []
    return [
        f"CREATE INDEX IF NOT EXISTS {p}_jobs_failed_due ON {p}_jobs (due_at, id) "
        "WHERE state = 'failed'"
    ]


def _v9_outcomes(p: str, dialect: str) -> list[str]:
    # Execution outcomes (sql/outcomes.py): a job's timeline is a range of the primary key
    # (job_id first, which also serves deleting them with the job); the newest final outcomes are
    # read per state on (state, at, job_id), and of every final state on (at, job_id), partial on
    # PostgreSQL (final outcomes only). The counts per task and state are a table of their own,
    # kept with every write and purge, so reading them never counts the outcomes.
    finals = "('succeeded', 'failed', 'retried', 'revoked')"
    recent = f" WHERE state IN {finals}" if dialect == "postgresql" else ""
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_outcomes (
            job_id varchar({MAX_JOB_ID_LENGTH}) NOT NULL,
            at double precision NOT NULL,
            state varchar({STATE_LENGTH}) NOT NULL,
            task varchar({MAX_TASK_NAME_LENGTH}) NOT NULL,
            worker varchar({MAX_WORKER_LENGTH}),
            runtime double precision,
            error text,
            retry_id varchar({MAX_JOB_ID_LENGTH}),
            PRIMARY KEY (job_id, at, state)
        )""",
        f"CREATE INDEX IF NOT EXISTS {p}_outcomes_state ON {p}_outcomes (state, at, job_id)",
        f"CREATE INDEX IF NOT EXISTS {p}_outcomes_recent ON {p}_outcomes (at, job_id){recent}",
        f"""CREATE TABLE IF NOT EXISTS {p}_outcome_counts (
            task varchar({MAX_TASK_NAME_LENGTH}) NOT NULL,
            state varchar({STATE_LENGTH}) NOT NULL,
            count bigint NOT NULL,
            PRIMARY KEY (task, state)
        )""",
    ]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "jobs and locks tables with due-time and claim-lease indexes", _v1_initial),
    Migration(2, "recurring jobs table with a next-run index", _v2_recurring),
    Migration(3, "jobs carry an optional broker message built at accept time", _v3_envelope),
    Migration(4, "scheduler instances and their heartbeats, for liveness", _v4_instances),
    Migration(5, "an index on state and updated_at, for purging old finished jobs", _v5_finished),
    Migration(6, "indexes on (state, due_at, id) and (due_at, id), for browsing jobs", _v6_browse),
    Migration(META_SINCE, "a table of facts about the store (its shard count)", _v7_meta),
    Migration(8, "an index on (due_at, id) of failed jobs, for listing them", _v8_failed),
    Migration(9, "execution outcomes of released jobs, and their counts per task", _v9_outcomes),
    Migration(10, "pauses of queues and tasks, and each job's queue", v10_pauses),
    Migration(11, "unique keys of jobs, one per task while a job waits", v11_unique),
    Migration(12, "rate limits of queues and tasks, and their next slots", v12_rate_limits),
    Migration(13, "calendars of excluded dates for recurring jobs", v13_calendars),
    Migration(
        14, "a paused recurring job's note, who paused it and when", v14_recurring_pause_notes
    ),
)


def migrate(conn: Connection, tables: Tables, dialect: str, now: sa.ColumnElement[float]) -> int:
    """Apply the migrations ``conn``'s database has not seen; return the resulting version.

    The caller runs this inside one transaction that it has already serialised against other
    processes (DDL is transactional on both dialects), so a crash leaves the old version intact
    and two processes never run the same step.
    """
    prefix = tables.jobs.name.removesuffix("_jobs")
    version_table = tables.schema_version
    conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {version_table.name} (version integer NOT NULL PRIMARY KEY, "
        "description text NOT NULL, applied_at double precision NOT NULL)"
    )
    current = conn.execute(sa.select(sa.func.max(version_table.c.version))).scalar() or 0
    latest = MIGRATIONS[-1].version
    if current > latest:
        raise StorageError(
            f"tables under prefix {prefix!r} are at schema version {current}, newer than the "
            f"{latest} this parallel-scheduler understands; upgrade it"
        )
    for step in MIGRATIONS[current:]:
        for ddl in step.statements(prefix, dialect):
            conn.exec_driver_sql(ddl)
        conn.execute(
            version_table.insert().values(
                version=step.version, description=step.description, applied_at=now
            )
        )
    return latest
