"""Unique jobs as only the SQL adapters can show them: the schema step that brings them to an
older database, PostgreSQL clients on their own connections racing for many keys, the claims
given back that keep their key, and the plans that find a key's holder by the unique index."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage_adapters import JobState, NewJob, RecordExistsError, Storage, UniqueAdd
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.storage.due_jobs import take_lock
from tests.storage.sql_helpers import add_as_released, explain, insert_and_analyze, released_before

MakeStorage = Callable[..., Storage]
UNIQUE_STEP = next(m.version for m in MIGRATIONS if "unique" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


postgresql_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)]
)


def unique(job_id: str, key: str, due_at: float, task: str = "tasks.invoice") -> NewJob:
    return NewJob(job_id, task, "{}", due_at, unique_key=key)


def state_of(storage: Storage, job_id: str) -> JobState:
    record = storage.get_job(job_id)
    assert record is not None, job_id
    return record.state


# -- the schema step ------------------------------------------------------------------------


@pytest.fixture
def older(
    adapter_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before unique jobs, holding two jobs of one task."""
    with released_before(adapter_kind, tmp_path, monkeypatch, UNIQUE_STEP) as store:
        now = store.now()
        add_as_released(store, "old-1", now - 2, task="tasks.invoice")
        add_as_released(store, "old-2", now - 1, task="tasks.invoice")
        yield store


def test_the_release_before_unique_jobs_upgrades_on_setup_with_its_jobs(
    older: SQLStorage,
) -> None:
    # When this release sets up a database of the release before
    older.setup()
    # Then every step ran once and the jobs table is the one build_tables describes
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    expected = build_tables(older._prefix).jobs
    inspector = sa.inspect(older._engine)
    columns = {c["name"]: c["nullable"] for c in inspector.get_columns(expected.name)}
    assert columns == {c.name: c.nullable for c in expected.columns}
    indexes = {i["name"]: i for i in inspector.get_indexes(expected.name)}
    index = indexes[f"{older._prefix}_jobs_unique"]
    assert index["unique"] and index["column_names"] == ["task", "unique_key"]
    # And the old jobs are intact, keyless, and hold no key of their task
    record = older.get_job("old-1")
    assert record is not None and record.unique_key is None
    assert older.fetch_due_ids(10) == ["old-1", "old-2"]
    now = older.now()
    assert older.add_unique_job(unique("new", "k", now), "keep") == UniqueAdd("new", True, False)
    assert older.add_unique_job(unique("again", "k", now), "keep") == UniqueAdd("new", False, False)


# -- claims given back keep their key -----------------------------------------------------------


def test_a_claim_backed_off_or_recovered_keeps_its_key(storage: Storage) -> None:
    now = storage.now()
    storage.add_unique_job(unique("first", "k", now - 1), "keep")
    lock = take_lock(storage)
    (claim,) = storage.claim_due(1, lock, lease=30)
    assert storage.back_off([claim], "refused", 0.05) == ["first"]
    assert storage.add_unique_job(unique("second", "k", now), "keep").job_id == "first"
    time.sleep(0.1)
    (claim,) = storage.claim_due(1, lock, lease=0.05)
    time.sleep(0.1)
    assert storage.recover_expired_claims() == 1
    assert state_of(storage, "first") is JobState.SCHEDULED
    assert storage.add_unique_job(unique("third", "k", now), "replace") == UniqueAdd(
        "first", False, True
    )
    assert storage.get_job("second") is None and storage.get_job("third") is None


def test_a_failed_job_rescheduled_onto_a_held_key_changes_nothing(storage: Storage) -> None:
    now = storage.now()
    storage.add_unique_job(unique("first", "k", now - 1), "keep")
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    storage.fail([claim], "gave up")
    storage.add_unique_job(unique("second", "k", now + 60), "keep")
    held = re.escape("unique_key 'k' of task 'tasks.invoice' is held by another job")
    with pytest.raises(RecordExistsError, match=held):
        storage.reschedule("first", now + 5)
    record = storage.get_job("first")
    assert record is not None and record.state is JobState.FAILED
    assert record.due_at == pytest.approx(now - 1) and record.attempts == 1
    # the connection it failed on serves the next call
    assert storage.reschedule("second", now + 30) is True


# -- racing clients on their own connections -------------------------------------------------

THREADS, KEYS = 8, 50


@postgresql_only
def test_clients_on_their_own_connections_agree_on_one_job_per_key(
    make_storage: MakeStorage,
) -> None:
    # Given eight clients, each a storage of its own, half keeping and half replacing, adding
    # a job for each of fifty keys at the same instant
    clients = [make_storage(pool_size=1) for _ in range(THREADS)]
    now = clients[0].now()
    barriers = [threading.Barrier(THREADS) for _ in range(KEYS)]
    answers: dict[tuple[int, int], UniqueAdd] = {}
    failures: list[BaseException] = []

    def add(t: int) -> None:
        rule = "keep" if t % 2 == 0 else "replace"
        try:
            for k in range(KEYS):
                barriers[k].wait(timeout=30)
                job = unique(f"c{t}-k{k}", f"key-{k}", now + 60 + t)
                answers[t, k] = clients[t].add_unique_job(job, rule)
        except BaseException as exc:
            failures.append(exc)
            for barrier in barriers:
                barrier.abort()

    threads = [threading.Thread(target=add, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # Then per key exactly one client created its job, and every answer names that job
    for k in range(KEYS):
        per_key = [answers[t, k] for t in range(THREADS)]
        (created,) = [answer for answer in per_key if answer.created]
        assert {answer.job_id for answer in per_key} == {created.job_id}
        assert all(a.replaced == (not a.created and t % 2 == 1) for t, a in enumerate(per_key))
        record = clients[0].get_job(created.job_id)
        assert record is not None and record.unique_key == f"key-{k}"
    assert clients[0].count_by_state()[JobState.SCHEDULED] == KEYS


# -- plans ------------------------------------------------------------------------------------


def fill(store: SQLStorage) -> None:
    """30,000 jobs, every tenth with a key, a tenth of those finished (their keys free)."""
    jobs = store._tables.jobs.name
    if store._dialect.name == "postgresql":
        series, text = "generate_series(1, 30000) AS g(n)", "n::text"
    else:
        series = "(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 30000)"
        series, text = f"{series} SELECT n FROM g)", "CAST(n AS TEXT)"
    insert_and_analyze(
        store,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        f"updated_at, unique_key) SELECT 'j' || {text}, 'tasks.invoice', '{{}}', n, "
        "CASE WHEN mod(n, 100) = 0 THEN 'enqueued' ELSE 'scheduled' END, 0, 0, n, "
        f"CASE WHEN mod(n, 10) = 0 THEN 'key-' || {text} END FROM {series}",
    )


def test_the_holder_of_a_key_is_found_by_the_unique_index(storage: Storage) -> None:
    assert isinstance(storage, SQLStorage)
    fill(storage)
    statements, index = storage._sql.unique, f"{storage._prefix}_jobs_unique "
    params = {"new_id": "x", "new_task": "tasks.invoice", "new_unique_key": "key-10"}
    for statement in (statements.holder, statements.lookup, statements.replace):
        if storage._dialect.name == "postgresql":
            plan = explain(storage, statement, **params)
        else:
            compiled = statement.compile(dialect=storage._engine.dialect)
            values = {**compiled.params, **params}
            positional = tuple(values[name] for name in compiled.positiontup or ())
            with storage._engine.connect() as conn:
                rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", positional).all()
            plan = "\n".join(str(row[-1]) for row in rows)
        assert index in plan, plan
        jobs = storage._tables.jobs.name  # never read whole (the pauses may be: they are few)
        assert f"Seq Scan on {jobs} " not in plan and f"SCAN {jobs}" not in plan, plan
