"""Calendars as only the SQL adapters can show them: the schema step (13) that brings them to a
database of the release before, the table dropped with the others, and a hand-written row that
cannot be read left out of the listing instead of breaking it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage_adapters import Storage
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.storage.sql_helpers import add_as_released, released_before

MakeStorage = Callable[..., Storage]
CALENDARS_STEP = next(m.version for m in MIGRATIONS if "calendars" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


@pytest.fixture
def older(
    adapter_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before calendars, holding a due job."""
    with released_before(adapter_kind, tmp_path, monkeypatch, CALENDARS_STEP) as store:
        add_as_released(store, "mail", store.now() - 1, task="tasks.mail")
        yield store


def test_the_release_before_calendars_upgrades_on_setup(older: SQLStorage) -> None:
    assert CALENDARS_STEP == 13
    older.setup()
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    expected = build_tables(older._prefix).calendars
    inspector = sa.inspect(older._engine)
    columns = {c["name"]: c["nullable"] for c in inspector.get_columns(expected.name)}
    assert columns == {c.name: c.nullable for c in expected.columns}
    assert inspector.get_pk_constraint(expected.name)["constrained_columns"] == ["name"]
    older.put_calendar("de", "Europe/Berlin", [("2026-12-25", "2026-12-26")], "ops")
    assert [c.name for c in older.list_calendars()] == ["de"]
    assert older.fetch_due_ids(10) == ["mail"]


def test_drop_removes_the_calendars_table_and_bad_rows_are_skipped(
    make_storage: MakeStorage,
) -> None:
    store = make_storage()
    assert isinstance(store, SQLStorage)
    table = store._tables.calendars
    with store._engine.begin() as conn:
        conn.execute(
            table.insert().values(name="broken", timezone="UTC", ranges="{", set_by="", set_at=0)
        )
    store.put_calendar("ok", "UTC", [], "")
    assert [c.name for c in store.list_calendars()] == ["ok"]
    assert store.get_calendar("broken") is None
    store.drop()
    assert not sa.inspect(store._engine).has_table(table.name)
