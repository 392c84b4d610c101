"""Retention as only one adapter can show it: the SQL purge walks its index (no scan, no sort),
and on Redis every index and hash shrinks with the purge, including jobs finished before the
finished indexes existed."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from devtools.waiting import wait_until
from storage_adapters import JobState, NewJob, Storage
from storage_adapters.redis.storage import SCHEMA_VERSION, RedisStorage
from storage_adapters.sql.postgresql import DUE_SCAN_SETTINGS
from storage_adapters.sql.retention import purge_statement
from storage_adapters.sql.sqlite import SQLiteStorage
from storage_adapters.sql.storage import SQLStorage
from tests.conftest import unique_prefix
from tests.storage.sql_helpers import explain, insert_and_analyze

FINISHED = [JobState.ENQUEUED, JobState.CANCELLED, JobState.EXPIRED]


def finish_some(storage: Storage, count: int) -> float:
    """``count`` jobs per finished state, two scheduled ones kept; returns a cutoff after them."""
    now = storage.now()
    storage.add_jobs(
        [NewJob(id=f"keep{i}", task="t", payload="{}", due_at=now + 3600) for i in (1, 2)]
    )
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    for state in FINISHED:
        ids = [f"{state.value}{i}" for i in range(count)]
        due = now + 3600 if state is JobState.CANCELLED else now - 10
        storage.add_jobs([NewJob(id=i, task="t", payload="{}", due_at=due) for i in ids])
        if state is JobState.CANCELLED:
            assert all(storage.cancel(i) for i in ids)
            continue
        claims = storage.claim_due(count, lock, 30)
        assert len(claims) == count
        ended = (
            storage.mark_enqueued(claims)
            if state is JobState.ENQUEUED
            else storage.expire(claims, "late")
        )
        assert len(ended) == count
    mark = storage.now()
    wait_until(lambda: storage.now() > mark, timeout=5)
    return storage.now()


# -- Redis ----------------------------------------------------------------------------------

redis_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("redis", marks=pytest.mark.redis)]
)


def index_sizes(store: RedisStorage) -> dict[str, int]:
    names = ["all", "schedule", "claimed"]
    names += [f"state:{s.value}" for s in JobState if s is not JobState.SCHEDULED]
    names += [f"finished:{s.value}" for s in FINISHED]
    with store._talking() as client:
        return {name: int(client.zcard(store._key(name))) for name in names}


def job_hashes(store: RedisStorage) -> int:
    with store._talking() as client:
        # a set: SCAN may return a key twice while the keyspace rehashes
        return len(set(client.scan_iter(match="\\{" + store._prefix + "\\}:job:*")))


@redis_only
def test_a_redis_purge_shrinks_every_index_and_leaves_no_hash(storage: Storage) -> None:
    assert isinstance(storage, RedisStorage)
    # Given ten jobs in each finished state and two scheduled ones
    cutoff = finish_some(storage, 10)
    before = index_sizes(storage)
    assert before["all"] == 32 and all(before[f"finished:{s.value}"] == 10 for s in FINISHED)
    # When they are purged in batches of at most seven
    batches = []
    while purged := storage.purge_finished(FINISHED, cutoff, 7):
        batches.append(purged)
    # Then every batch kept to its limit and only the scheduled jobs are left, in every index
    assert max(batches) <= 7 and sum(batches) == 30
    after = index_sizes(storage)
    assert after == {**dict.fromkeys(after, 0), "all": 2, "schedule": 2}
    assert job_hashes(storage) == 2


@redis_only
def test_jobs_finished_under_schema_1_are_indexed_by_setup(storage: Storage) -> None:
    assert isinstance(storage, RedisStorage)
    # Given finished jobs stored as a release without the finished indexes left them
    cutoff = finish_some(storage, 3)
    with storage._talking() as client:
        client.delete(*(storage._finished_key(s) for s in FINISHED))
        client.set(storage._key("version"), 1)
    assert storage.purge_finished(FINISHED, cutoff, 100) == 0
    # When this release sets the prefix up
    storage.setup()
    # Then they are indexed by their finish time and purged like any other, and the schema is
    # this release's
    with storage._talking() as client:
        assert client.get(storage._key("version")) == str(SCHEMA_VERSION)
    assert storage.purge_finished(FINISHED, cutoff, 100) == 9
    assert index_sizes(storage)["all"] == 2 and job_hashes(storage) == 2


# -- SQL plans ------------------------------------------------------------------------------


def test_the_sqlite_purge_walks_the_finished_index(tmp_path: Any) -> None:
    store = SQLiteStorage(f"sqlite:///{tmp_path / 'plan.db'}", prefix=unique_prefix())
    try:
        store.setup()
        statement = purge_statement(store._tables.jobs, JobState.ENQUEUED, "sqlite")
        compiled = statement.compile(dialect=store._engine.dialect)
        values = {**compiled.params, "older_than": 1e9, "limit": 1000}
        params = tuple(values[name] for name in compiled.positiontup or ())
        with store._engine.connect() as conn:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).all()
        plan = "\n".join(str(row[-1]) for row in rows)
        assert f"INDEX {store._prefix}_jobs_finished" in plan, plan
        assert "TEMP B-TREE" not in plan and "SCAN" not in plan.replace("SCAN USING", ""), plan
    finally:
        store.close()


@pytest.mark.parametrize("adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)])
def test_the_postgresql_purge_walks_the_finished_index(storage: Storage) -> None:
    # Given a table of many finished and a few scheduled jobs, analysed
    assert isinstance(storage, SQLStorage)
    jobs = storage._tables.jobs.name
    insert_and_analyze(
        storage,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, 't', '{}', n, CASE WHEN mod(n, 3) = 0 THEN 'enqueued' "
        "WHEN mod(n, 3) = 1 THEN 'cancelled' ELSE 'scheduled' END, 1, 0, n "
        "FROM generate_series(1, 30000) AS n",
    )
    # When the purge statement is explained, Then it reaches its rows through the index
    statement = purge_statement(storage._tables.jobs, JobState.ENQUEUED, "postgresql")
    plan = explain(storage, statement, older_than=20000.0, limit=1000)
    assert f"{storage._prefix}_jobs_finished" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan, plan
    # And it deletes exactly one batch, oldest first
    assert storage.purge_finished([JobState.ENQUEUED], 20000.0, 1000) == 1000
    with storage._engine.connect() as conn:
        oldest = conn.execute(
            sa.text(f"SELECT min(updated_at) FROM {jobs} WHERE state = 'enqueued'")
        ).scalar()
    assert oldest == 3003.0  # the 1,000 oldest were 3, 6, … 3000


@pytest.mark.parametrize("adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)])
def test_the_postgresql_purge_reaches_rows_by_key_before_the_table_is_analysed(
    storage: Storage,
) -> None:
    # Given a table analysed while it held scheduled jobs only, then bulk-loaded with finished
    # jobs that autovacuum has not analysed yet (the planner expects next to none of them)
    assert isinstance(storage, SQLStorage)
    jobs = storage._tables.jobs.name
    rows = (
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, 't', '{}', n, '%s', 1, 0, n FROM generate_series(%d, %d) n"
    )
    insert_and_analyze(storage, jobs, rows % ("scheduled", 1, 2000))
    insert_and_analyze(storage, jobs, rows % ("enqueued", 2001, 60000), analyze=False)
    # When the purge statement is explained under the settings the purge runs it with
    statement = purge_statement(storage._tables.jobs, JobState.ENQUEUED, "postgresql")
    plan = explain(storage, statement, DUE_SCAN_SETTINGS, older_than=30000.0, limit=1000)
    # Then the batch is read by walking the finished index in order (no sort of every finished
    # job), and the delete reaches it through the primary key alone (no bitmap of the whole
    # finished index ANDed with it): together 100-400 ms a batch at 1,000,000 rows otherwise
    assert f"Index Scan using {storage._prefix}_jobs_finished" in plan, plan
    assert "Sort" not in plan and "BitmapAnd" not in plan, plan
    assert f"{storage._prefix}_jobs_pkey" in plan, plan
    assert storage.purge_finished([JobState.ENQUEUED], 30000.0, 1000) == 1000


@redis_only
def test_jobs_moved_onto_broker_lists_are_indexed_and_purged(storage: Storage) -> None:
    assert isinstance(storage, RedisStorage)
    # Given due jobs with an envelope, moved onto a list on the storage's own database
    queue = storage._key("q")  # under the prefix: dropped with it
    now = storage.now()
    storage.add_jobs([NewJob(f"m{i}", "t", "{}", now - 5, f"{queue}\nmsg{i}") for i in range(4)])
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    moved, claimed = storage.release_to_lists(10, lock, 30, storage._db)
    assert (len(moved), claimed) == (4, [])
    # Then they are in the enqueued finished index, and a purge deletes every trace of them
    assert index_sizes(storage)["finished:enqueued"] == 4
    cutoff = storage.now()
    wait_until(lambda: storage.now() > cutoff, timeout=5)
    assert storage.purge_finished([JobState.ENQUEUED], storage.now(), 10) == 4
    assert set(index_sizes(storage).values()) == {0} and job_hashes(storage) == 0
