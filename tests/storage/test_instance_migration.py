"""The liveness table arrives by a schema migration: a database set up by the release before it
upgrades on ``setup()``, on SQLite and PostgreSQL, and ends with the table ``build_tables`` says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage_adapters import InstanceRecord, StorageError
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.storage.sql_helpers import released_before

INSTANCES_STEP = next(m.version for m in MIGRATIONS if "instances" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def older(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before the instances table."""
    with released_before(str(request.param), tmp_path, monkeypatch, INSTANCES_STEP) as store:
        yield store


def test_the_release_before_liveness_upgrades_on_setup(older: SQLStorage) -> None:
    record = InstanceRecord("i-1", "h", 1, "0", 1.0, 0.0, "{}")
    with pytest.raises(StorageError, match=r"setup\(\)"):
        older.register_instance(record)
    older.setup()
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    older.register_instance(record)
    assert [i.id for i in older.list_instances()] == ["i-1"]
    expected = build_tables(older._prefix).instances
    inspector = sa.inspect(older._engine)
    columns = {c["name"]: c["nullable"] for c in inspector.get_columns(expected.name)}
    assert columns == {c.name: c.nullable for c in expected.columns}
    indexes = {index["name"] for index in inspector.get_indexes(expected.name)}
    assert f"{older._prefix}_instances_heartbeat" in indexes
