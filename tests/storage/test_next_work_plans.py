"""The scheduler's idle peek (``next_work_at``) on SQL reads both of its minimums from the end of
an index, never a scan: a store with millions of finished jobs must idle as cheaply as an empty
one. Its contract (what it returns) is in the contract suite; this is how the SQL adapters serve
it, on PostgreSQL (``EXPLAIN``, with and without fresh statistics) and SQLite (its query plan).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage_adapters import from_url
from storage_adapters.sql.sqlite import SQLiteStorage
from storage_adapters.sql.storage import SQLStorage
from tests.conftest import storage_url, unique_prefix
from tests.storage.sql_helpers import explain, insert_and_analyze


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[SQLStorage]:
    store = from_url(storage_url("postgresql", tmp_path), prefix=unique_prefix())
    assert isinstance(store, SQLStorage)
    store.setup()
    yield store
    store.drop()
    store.close()


def fill(store: SQLStorage, finished: int, scheduled: int, claimed: int, analyze: bool) -> None:
    """Mostly finished jobs, some scheduled, a few claimed with leases, in one statement."""
    jobs = store._tables.jobs.name
    insert_and_analyze(
        store,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at, lease_until) SELECT 'j' || n, 't', '{}', n, CASE "
        "WHEN n <= %(finished)s THEN 'enqueued' "
        "WHEN n <= %(finished)s + %(scheduled)s THEN 'scheduled' ELSE 'claimed' END, 1, 0, 0, "
        "CASE WHEN n > %(finished)s + %(scheduled)s THEN 4e9 + n END "
        "FROM generate_series(1, %(total)s) AS n",
        {"finished": finished, "scheduled": scheduled, "total": finished + scheduled + claimed},
        analyze,
    )


@pytest.mark.postgresql
@pytest.mark.parametrize("analyze", [True, False], ids=["analysed", "not-yet-analysed"])
def test_the_peek_reads_both_minimums_from_their_indexes(pg: SQLStorage, analyze: bool) -> None:
    # Given a table of mostly finished jobs, with or without statistics yet
    fill(pg, finished=20_000, scheduled=500, claimed=50, analyze=analyze)
    # Then each minimum is one step along its own partial index, with nothing scanned or sorted
    plan = explain(pg, pg._sql.next_work_at)
    assert f"using {pg._prefix}_jobs_due" in plan, plan
    assert f"using {pg._prefix}_jobs_claim_lease" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan and "Bitmap" not in plan, plan
    # And it answers with the earlier of the two (the first scheduled job, due at 20001)
    assert pg.next_work_at() == 20_001.0


def test_the_peek_searches_an_index_for_each_half_on_sqlite(tmp_path: Path) -> None:
    """SQLite reads the earliest due time from the end of the (state, due_at, id) due index.
    For the lease ends its planner, without statistics, prefers the (state, updated_at) index
    to the partial lease index: it reads the claimed jobs only (the few in flight), not the
    table."""
    store = SQLiteStorage(f"sqlite:///{tmp_path / 'plan.db'}", prefix=unique_prefix())
    try:
        store.setup()
        compiled = store._sql.next_work_at.compile(dialect=store._engine.dialect)
        with store._engine.connect() as conn:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
        searches = [str(row[-1]) for row in rows if f" {store._prefix}_jobs" in str(row[-1])]
        plan = "\n".join(str(row[-1]) for row in rows)
        assert len(searches) == 2, plan
        assert all(line.startswith("SEARCH") and "INDEX" in line for line in searches), plan
        assert f"INDEX {store._prefix}_jobs_due (state=?)" in searches[0], plan
    finally:
        store.close()
