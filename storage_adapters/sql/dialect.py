"""What differs between the SQL backends (``Dialect``), and how a job state is written in a
statement (a literal, so the planner can match partial indexes), for every statement builder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from storage_adapters.records import JobState

__all__ = ["Dialect", "UpsertInsert", "state_is", "state_literal"]

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
    #: Run first in the transactions of ``pause`` and ``resume``, ``{jobs}`` naming the jobs
    #: table ("" for none: SQLite's ``BEGIN IMMEDIATE`` holds the whole file); see sql/pauses.py.
    pause_lock: str = ""
    #: Run after a ``pause`` or ``resume`` that moved many jobs, outside any transaction,
    #: ``{jobs}`` naming the jobs table ("" for none); see sql/pauses.py.
    after_mass_move: str = ""


def state_is(column: sa.ColumnElement[Any], state: JobState) -> sa.ColumnElement[bool]:
    return column == state_literal(state)


def state_literal(state: JobState) -> sa.ColumnElement[str]:
    return sa.literal_column(f"'{state.value}'", sa.String)
