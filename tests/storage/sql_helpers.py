"""Set-up and inspection shared by the SQL-specific storage tests: filling a table in one
statement, reading PostgreSQL's plan for a statement, and a prefix set up by an older release."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from storage_adapters import from_url
from storage_adapters.sql import tables as sql_tables
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS
from tests.conftest import storage_url, unique_prefix


def insert_and_analyze(
    store: SQLStorage,
    table: str,
    insert: str,
    params: dict[str, Any] | None = None,
    analyze: bool = True,
) -> None:
    """Run one bulk ``insert`` into ``table``, then ANALYZE it (unless told not to) so the
    planner sees the rows a plan assertion is about."""
    with store._engine.connect() as conn:
        conn.exec_driver_sql(insert, params)
        if analyze:
            conn.exec_driver_sql(f"ANALYZE {table}")


def explain(
    store: SQLStorage, statement: sa.ClauseElement, settings: str = "", **params: Any
) -> str:
    """PostgreSQL's plan for ``statement``, under ``settings`` (SET LOCAL lines) when given:
    they live in a transaction rolled back afterwards, as the adapter's own reads do."""
    compiled = statement.compile(dialect=store._engine.dialect)
    values = {**compiled.params, **params}
    with store._engine.connect() as conn:
        if settings:
            conn.exec_driver_sql(f"BEGIN; {settings}")
        lines = conn.exec_driver_sql(f"EXPLAIN {compiled}", values).scalars().all()
        if settings:
            conn.exec_driver_sql("ROLLBACK")
    return "\n".join(lines)


def add_as_released(store: SQLStorage, job_id: str, due_at: float, task: str = "t") -> None:
    """A scheduled job written as every release so far wrote one (the columns of schema 1), for
    a prefix set up by an older release, whose jobs table lacks the newer columns."""
    jobs = store._tables.jobs.name
    with store._engine.connect() as conn:
        conn.execute(
            sa.text(
                f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
                "updated_at) VALUES (:id, :task, '{}', :due, 'scheduled', 0, :due, :due)"
            ),
            {"id": job_id, "task": task, "due": due_at},
        )


@contextmanager
def released_before(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before migration ``step``; dropped afterwards."""
    store = from_url(storage_url(kind, tmp_path), prefix=unique_prefix())
    assert isinstance(store, SQLStorage)
    with monkeypatch.context() as released:
        released.setattr(sql_tables, "MIGRATIONS", MIGRATIONS[: step - 1])
        store.setup()
    try:
        yield store
    finally:
        store.drop()
        store.close()
