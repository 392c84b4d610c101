"""The later steps of the SQL schema's history (``MIGRATIONS`` in ``sql/tables.py`` lists every
step, these among them), apart so that ``tables.py`` stays one module's size.

The column sizes these steps and ``build_tables`` share are defined here, so ``tables.py`` can
import them without an import cycle. Like every step, the functions below are frozen DDL: never
edited once released.
"""

from __future__ import annotations

from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH
from storage_adapters.checks.unique import MAX_UNIQUE_KEY_LENGTH
from storage_adapters.records import MAX_TASK_NAME_LENGTH

__all__ = [
    "MAX_QUEUE_NAME_LENGTH",
    "STATE_LENGTH",
    "v10_pauses",
    "v11_unique",
    "v12_rate_limits",
    "v13_calendars",
    "v14_recurring_pause_notes",
]

STATE_LENGTH = 16
#: A job's queue and a pause's name are as long as a task name may be (``checks/pauses.py``).
MAX_QUEUE_NAME_LENGTH = MAX_TASK_NAME_LENGTH


def v10_pauses(p: str, dialect: str) -> list[str]:
    # Pauses of a queue or a task (sql/pauses.py): a job remembers its queue, and the jobs a pause
    # holds are in state 'held'. Resuming reads them by (due_at, id): on PostgreSQL a partial
    # index of their own, which stays as small as they are few and keeps them out of the due
    # index; SQLite's due index is (state, due_at, id) over every state already.
    held = (
        [f"CREATE INDEX IF NOT EXISTS {p}_jobs_held ON {p}_jobs (due_at, id) WHERE state = 'held'"]
        if dialect == "postgresql"
        else []
    )
    return [
        f"ALTER TABLE {p}_jobs ADD COLUMN queue varchar({MAX_QUEUE_NAME_LENGTH})",
        f"""CREATE TABLE IF NOT EXISTS {p}_pauses (
            kind varchar({STATE_LENGTH}) NOT NULL,
            name varchar({MAX_QUEUE_NAME_LENGTH}) NOT NULL,
            note text NOT NULL,
            paused_by varchar({MAX_PAUSED_BY_LENGTH}) NOT NULL,
            paused_at double precision NOT NULL,
            PRIMARY KEY (kind, name)
        )""",
        *held,
    ]


def v11_unique(p: str, dialect: str) -> list[str]:
    # Unique jobs (sql/unique.py): a job may carry a unique key, which it holds for its task while
    # it is scheduled, held or claimed. The partial unique index is that rule, kept by the
    # database against racing writers, and the lookup of a key's holder; jobs without a key
    # (nearly all) are never in it. Same DDL on both dialects.
    return [
        f"ALTER TABLE {p}_jobs ADD COLUMN unique_key varchar({MAX_UNIQUE_KEY_LENGTH})",
        f"CREATE UNIQUE INDEX IF NOT EXISTS {p}_jobs_unique ON {p}_jobs (task, unique_key) "
        "WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'held', 'claimed')",
    ]


def v12_rate_limits(p: str, dialect: str) -> list[str]:
    # Rate limits of a queue or a task (sql/rate_limits.py): one row per limit, whose ``tat`` (the
    # generic cell rate algorithm's theoretical arrival time, NULL until a slot is reserved) is
    # the only state a reservation reads and writes, under the row's lock; a job given back due
    # at its slot remembers it (``slot_at``). Same DDL on both dialects; times are epoch seconds,
    # as in every other table.
    return [
        f"ALTER TABLE {p}_jobs ADD COLUMN slot_at double precision",
        f"""CREATE TABLE IF NOT EXISTS {p}_rate_limits (
            kind varchar({STATE_LENGTH}) NOT NULL,
            name varchar({MAX_QUEUE_NAME_LENGTH}) NOT NULL,
            count integer NOT NULL,
            period double precision NOT NULL,
            burst integer NOT NULL,
            set_by varchar({MAX_PAUSED_BY_LENGTH}) NOT NULL,
            set_at double precision NOT NULL,
            tat double precision,
            PRIMARY KEY (kind, name)
        )""",
    ]


def v13_calendars(p: str, dialect: str) -> list[str]:
    # Calendars of excluded dates (sql/calendars.py): one row per calendar, its merged date ranges
    # a JSON text ([["2026-12-24","2026-12-26"], ...]) read whole by each recurring pass. Same
    # DDL on both dialects; set_at is epoch seconds, as in every other table.
    return [
        f"""CREATE TABLE IF NOT EXISTS {p}_calendars (
            name varchar(100) NOT NULL PRIMARY KEY,
            timezone varchar(100) NOT NULL,
            ranges text NOT NULL,
            set_by varchar({MAX_PAUSED_BY_LENGTH}) NOT NULL,
            set_at double precision NOT NULL
        )""",
    ]


def v14_recurring_pause_notes(p: str, dialect: str) -> list[str]:
    # A paused recurring job keeps why, who and since when (sql/recurring.py); NULL while it is
    # enabled and in the rows paused before this step. Same DDL on both dialects; one column per
    # statement, as SQLite adds them.
    return [
        f"ALTER TABLE {p}_recurring ADD COLUMN pause_note text",
        f"ALTER TABLE {p}_recurring ADD COLUMN paused_by varchar({MAX_PAUSED_BY_LENGTH})",
        f"ALTER TABLE {p}_recurring ADD COLUMN paused_at double precision",
    ]
