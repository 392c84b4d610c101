"""Browsing as only one adapter can show it: on SQL every page shape walks an index in order (no
sequential scan, no sort; the keyset served as an index condition) and the finish counts read the
finish-time index; schema 6 arrives by migration; on Redis ties are in byte order and a task filter
that needs several script steps loses and repeats nothing."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from storage_adapters import (
    JobQuery,
    JobRecord,
    JobState,
    NewJob,
    Storage,
    from_url,
)
from storage_adapters.redis import browse as redis_browse
from storage_adapters.redis.storage import RedisStorage
from storage_adapters.sql.browse import (
    finished_counts_statement,
    page_params,
    page_statement,
)
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS
from tests.conftest import unique_prefix
from tests.storage.sql_helpers import (
    add_as_released,
    explain,
    insert_and_analyze,
    released_before,
)

BROWSE_STEP = next(m.version for m in MIGRATIONS if "browsing" in m.description)
#: One query per shape: each state or none, with or without a task, a due range, a keyset.
SHAPES = [
    JobQuery(state, task, *((100.0, 9000.0) if ranged else (None, None)), after)
    for state, task, ranged, after in itertools.product(
        [None, *JobState], [None, "t3"], [False, True], [None, (50.0, "j150")]
    )
]


def fill(store: SQLStorage) -> None:
    """60,000 jobs, ten tasks, due times shared by three jobs each: half enqueued, a sixth
    scheduled, a sixth cancelled, the rest expired but for a few claimed; then ANALYZE."""
    jobs = store._tables.jobs.name
    insert_and_analyze(
        store,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, 't' || mod(n, 10), '{}', n / 3, CASE "
        "WHEN mod(n, 6) = 0 THEN 'scheduled' WHEN mod(n, 6) = 1 THEN 'cancelled' "
        "WHEN mod(n, 6) = 2 AND mod(n, 1000) = 2 THEN 'claimed' "
        "WHEN mod(n, 6) = 2 THEN 'expired' "
        "ELSE 'enqueued' END, 1, 0, n FROM generate_series(1, 60000) AS n",
    )


def compiled(store: SQLStorage, statement: sa.ClauseElement, params: dict[str, Any]) -> Any:
    done = statement.compile(dialect=store._engine.dialect)
    return done, {**done.params, **params}


def postgresql_plan(store: SQLStorage, statement: sa.ClauseElement, params: dict[str, Any]) -> str:
    """The plan under the settings the page read runs with (``_due_rows``)."""
    return explain(store, statement, store._dialect.due_scan_settings, **params)


def sqlite_plan(store: SQLStorage, statement: sa.ClauseElement, params: dict[str, Any]) -> str:
    done, values = compiled(store, statement, params)
    positional = tuple(values[name] for name in done.positiontup or ())
    with store._engine.connect() as conn:
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {done}", positional).all()
    return "\n".join(str(row[-1]) for row in rows)


@pytest.mark.parametrize("adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)])
def test_every_postgresql_page_shape_walks_an_index_in_order(storage: Storage) -> None:
    assert isinstance(storage, SQLStorage)
    fill(storage)
    p = storage._prefix
    ordered = (
        f"using {p}_jobs_due ",
        f"using {p}_jobs_due_all ",
        f"using {p}_jobs_state_due ",
        f"using {p}_jobs_failed_due ",
        f"using {p}_jobs_held ",
    )
    used = set()
    for query in SHAPES:
        plan = postgresql_plan(
            storage, page_statement(storage._tables.jobs, query), page_params(query, 50)
        )
        assert "Seq Scan" not in plan and "Bitmap" not in plan, (query, plan)
        if query.state is JobState.CLAIMED:
            # the few claims in flight, found by their lease index, then sorted
            assert f"using {p}_jobs_claim_lease " in plan, (query, plan)
            continue
        assert "Sort" not in plan, (query, plan)
        index = [name for name in ordered if name in plan]
        assert len(index) == 1, (query, plan)
        used.add(index[0])
        if query.after is not None:  # the keyset bounds the walk: an index condition
            conditions = [line for line in plan.splitlines() if "Index Cond" in line]
            assert any("ROW(due_at" in line for line in conditions), (query, plan)
    # And each of the five indexes serves some shape (the rare states take the state index,
    # failed and held jobs their own)
    assert used == set(ordered)


@pytest.mark.parametrize("adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)])
def test_postgresql_finish_counts_read_the_finish_index(storage: Storage) -> None:
    assert isinstance(storage, SQLStorage)
    fill(storage)
    for state in (JobState.ENQUEUED, JobState.CANCELLED, JobState.EXPIRED):
        statement = finished_counts_statement(storage._tables.jobs, state, "postgresql")
        params = {"since": 50000.0, "width": 60.0, "end": 51000.0}
        plan = postgresql_plan(storage, statement, params)
        assert f"{storage._prefix}_jobs_finished" in plan, plan
        assert "Seq Scan" not in plan, plan
    # And the statement counts right: one finish per second by id, a sixth of them cancelled
    statement = finished_counts_statement(storage._tables.jobs, JobState.CANCELLED, "postgresql")
    params = {"since": 50000.0, "width": 100.0, "end": 51000.0}
    counts = {int(row.bucket): int(row.jobs) for row in storage._rows(statement, params)}
    assert counts == {
        k: sum(1 for n in range(50000 + 100 * k, 50100 + 100 * k) if n % 6 == 1) for k in range(10)
    }


def test_every_sqlite_page_shape_walks_an_index_in_order(tmp_path: Path) -> None:
    store = from_url(f"sqlite:///{tmp_path / 'plan.db'}", prefix=unique_prefix())
    assert isinstance(store, SQLStorage)
    try:
        store.setup()
        p = store._prefix
        for query in SHAPES:
            statement = page_statement(store._tables.jobs, query)
            plan = sqlite_plan(store, statement, page_params(query, 50))
            index = (
                f"USING INDEX {p}_jobs_due_all"
                if query.state is None
                else f"USING INDEX {p}_jobs_due "
            )
            assert index in plan, (query, plan)
            assert "TEMP B-TREE" not in plan, (query, plan)
        statement = finished_counts_statement(store._tables.jobs, JobState.ENQUEUED, "sqlite")
        plan = sqlite_plan(store, statement, {"since": 1.0, "width": 1.0, "end": 9.0})
        assert f"INDEX {p}_jobs_finished (state=? AND updated_at>?" in plan, plan
    finally:
        store.drop()
        store.close()


# -- the migration --------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def older(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before browsing, holding one job."""
    with released_before(str(request.param), tmp_path, monkeypatch, BROWSE_STEP) as store:
        add_as_released(store, "old", store.now() + 60)
        yield store


def test_the_release_before_browsing_upgrades_on_setup(older: SQLStorage) -> None:
    indexes = {i["name"] for i in sa.inspect(older._engine).get_indexes(older._tables.jobs.name)}
    assert f"{older._prefix}_jobs_due_all" not in indexes
    older.setup()
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    indexes = {i["name"] for i in sa.inspect(older._engine).get_indexes(older._tables.jobs.name)}
    assert f"{older._prefix}_jobs_due_all" in indexes
    if older._dialect.name == "postgresql":
        assert f"{older._prefix}_jobs_state_due" in indexes
    assert [j.id for j in older.list_jobs_page(JobQuery(state=JobState.SCHEDULED), 10)] == ["old"]


# -- Redis ----------------------------------------------------------------------------------

redis_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("redis", marks=pytest.mark.redis)]
)


@redis_only
def test_redis_ties_are_in_byte_order(storage: Storage) -> None:
    # Given jobs due at one time whose ids order differently by bytes and by most locales
    due = storage.now() + 60
    ids = ["a", "B", "_x", "a0", "Ab", "b", "Z9", "é"]
    storage.add_jobs([NewJob(i, "t", "{}", due) for i in ids])
    in_bytes = sorted(ids, key=lambda i: i.encode())
    # When paged one at a time, Then the order is the bytes' order, each id once
    seen: list[str] = []
    after = None
    while page := storage.list_jobs_page(JobQuery(after=after), 1):
        seen.append(page[0].id)
        after = (page[0].due_at, page[0].id)
    assert seen == in_bytes
    # And a page after an id that is not stored starts at the next one in byte order
    page = storage.list_jobs_page(JobQuery(after=(due, "Ac")), 3)
    assert [j.id for j in page] == [i for i in in_bytes if i.encode() > b"Ac"][:3]


def paged(storage: Storage, query: JobQuery, limit: int) -> list[JobRecord]:
    rows: list[JobRecord] = []
    while True:
        page = storage.list_jobs_page(query, limit)
        rows += page
        if len(page) < limit:
            return rows
        last = (page[-1].due_at, page[-1].id)
        query = JobQuery(query.state, query.task, query.due_from, query.due_to, last)


@redis_only
def test_a_redis_task_filter_in_many_script_steps_loses_and_repeats_nothing(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(storage, RedisStorage)
    # Given 300 jobs of three tasks on 7 due times, and scripts that examine 4 members a step
    due = storage.now() + 60
    jobs = [NewJob(f"j{n}", f"t{n % 3}", "{}", due + n % 7) for n in range(300)]
    storage.add_jobs(jobs)
    monkeypatch.setattr(redis_browse, "PAGE_BUDGET", 4)
    # When one task is paged through, with and without a due range
    for query in (JobQuery(task="t1"), JobQuery(task="t1", due_from=due + 2, due_to=due + 4)):
        got = [j.id for j in paged(storage, query, 7)]
        wanted = sorted(
            (
                j
                for j in jobs
                if j.task == "t1" and (query.due_from or 0) <= j.due_at <= (query.due_to or 1e18)
            ),
            key=lambda j: (j.due_at, j.id.encode()),
        )
        # Then every matching job comes once, in order
        assert got == [j.id for j in wanted], query
