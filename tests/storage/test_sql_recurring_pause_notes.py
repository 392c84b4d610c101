"""A recurring job's pause note as only the SQL adapters can show it: the schema step (14) that
brings the columns to a database of the release before, where a job paused then reads no note,
who or since when, and pauses with one afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage_adapters import NewRecurring
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.storage.sql_helpers import released_before

NOTES_STEP = next(m.version for m in MIGRATIONS if "note" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


@pytest.fixture
def older(
    adapter_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before pause notes, holding a paused recurring job
    written as that release wrote one (the columns of schema 2)."""
    with released_before(adapter_kind, tmp_path, monkeypatch, NOTES_STEP) as store:
        with store._engine.begin() as conn:
            conn.execute(
                sa.text(
                    f"INSERT INTO {store._prefix}_recurring (id, task, payload, schedule, enabled, "
                    "next_run_at, last_run_at, history, version, created_at, updated_at) VALUES "
                    "('old', 't', '{}', '{\"cron\": \"* * * * *\"}', :no, 0, NULL, '[]', 1, 0, 0)"
                ),
                {"no": False},
            )
        yield store


def test_the_release_before_pause_notes_upgrades_on_setup(older: SQLStorage) -> None:
    assert NOTES_STEP == 14
    older.setup()
    expected = build_tables(older._prefix).recurring
    columns = {
        c["name"]: c["nullable"] for c in sa.inspect(older._engine).get_columns(expected.name)
    }
    assert columns == {c.name: c.nullable for c in expected.columns}
    old = older.get_recurring("old")
    assert old is not None and not old.enabled
    assert (old.pause_note, old.paused_by, old.paused_at) == (None, None, None)
    assert older.set_recurring_enabled("old", False, None, "now with a note", "ops")
    (listed,) = older.list_recurring(10)
    assert (listed.pause_note, listed.paused_by) == ("now with a note", "ops")
    assert listed.paused_at is not None
    older.save_recurring(NewRecurring("new", "t", "{}", "{}", True, None), "create")
    assert older.get_recurring("new").pause_note is None  # type: ignore[union-attr]
