"""Pauses as only the SQL adapters can show them: the schema step that brings them to an older
database, producers on other connections racing a pause and a resume, a chunk of PostgreSQL's
one-transaction release given back while a pause waits for it, and the plans that keep held jobs
out of every read of the due set."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, DelayedJobScheduler, Settings
from storage_adapters import (
    ChunkSettlement,
    ClaimedJob,
    InvalidArgumentError,
    InvalidRecordError,
    JobQuery,
    JobState,
    ManualFiring,
    NewJob,
    PauseKind,
    Storage,
)
from storage_adapters.sql import plumbing as plumbing_module
from storage_adapters.sql.browse import page_params, page_statement
from storage_adapters.sql.postgresql import PostgreSQLStorage
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.conftest import POSTGRESQL_URL
from tests.storage.contract.test_recurring_contract import recurring
from tests.storage.due_jobs import LOCK, take_lock
from tests.storage.sql_helpers import add_as_released, explain, insert_and_analyze, released_before

MakeStorage = Callable[..., Storage]
TASK, QUEUE = PauseKind.TASK, PauseKind.QUEUE
PAUSES_STEP = next(m.version for m in MIGRATIONS if "pauses" in m.description)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


postgresql_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)]
)


def job(job_id: str, due_at: float, task: str = "tasks.mail", queue: str | None = None) -> NewJob:
    return NewJob(id=job_id, task=task, payload="{}", due_at=due_at, queue=queue)


def state_of(storage: Storage, job_id: str) -> JobState:
    record = storage.get_job(job_id)
    assert record is not None, job_id
    return record.state


# -- the schema step ------------------------------------------------------------------------


@pytest.fixture
def older(
    adapter_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLStorage]:
    """A prefix set up by the release just before pauses, holding two due jobs."""
    with released_before(adapter_kind, tmp_path, monkeypatch, PAUSES_STEP) as store:
        now = store.now()
        add_as_released(store, "mail", now - 2, task="tasks.mail")
        add_as_released(store, "other", now - 1, task="tasks.other")
        yield store


def test_the_release_before_pauses_upgrades_on_setup_with_its_jobs(older: SQLStorage) -> None:
    # When this release sets up a database of the release before
    older.setup()
    # Then every step ran once and the schema is the one build_tables describes
    with older._engine.connect() as conn:
        versions = conn.execute(sa.select(older._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    expected = build_tables(older._prefix)
    inspector = sa.inspect(older._engine)
    for table in (expected.jobs, expected.pauses):
        columns = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
        assert columns == {c.name: c.nullable for c in table.columns}, table.name
    primary = inspector.get_pk_constraint(expected.pauses.name)["constrained_columns"]
    assert primary == ["kind", "name"]
    if older._dialect.name == "postgresql":
        indexes = {index["name"] for index in inspector.get_indexes(expected.jobs.name)}
        assert f"{older._prefix}_jobs_held" in indexes
    # And the old jobs are intact, with no queue, and a pause of their task holds them
    record = older.get_job("mail")
    assert record is not None and record.queue is None and record.state is JobState.SCHEDULED
    assert older.pause(TASK, "tasks.mail", "upgraded", "ops") == 1
    assert older.fetch_due_ids(10) == ["other"]
    assert older.resume(TASK, "tasks.mail") == 1
    assert older.fetch_due_ids(10) == ["mail", "other"]


def test_drop_removes_the_pauses_table(make_storage: MakeStorage) -> None:
    store = make_storage()
    assert isinstance(store, SQLStorage)
    store.pause(QUEUE, "emails", "", "")
    store.drop()
    assert not sa.inspect(store._engine).has_table(store._tables.pauses.name)
    store.setup()  # the fixture drops it again at the end
    assert store.list_pauses() == []


def test_a_hand_written_pause_of_another_kind_never_makes_the_listing_crash(
    storage: Storage,
) -> None:
    assert isinstance(storage, SQLStorage)
    storage.pause(QUEUE, "emails", "kept", "ops")
    with storage._engine.begin() as conn:
        conn.execute(
            storage._tables.pauses.insert().values(
                kind="topic", name="x", note="", paused_by="", paused_at=0.0
            )
        )
    assert [(p.name, p.note) for p in storage.list_pauses()] == [("emails", "kept")]


# -- what is stored ---------------------------------------------------------------------------


@pytest.mark.parametrize("queue", ["", "q" * 256, 42, b"emails"])
def test_a_bad_queue_is_refused_and_nothing_written(storage: Storage, queue: object) -> None:
    now = storage.now()
    with pytest.raises(InvalidRecordError, match="queue must be None or a str of 1-255"):
        storage.add_jobs([job("good", now), job("bad", now, queue=queue)])  # type: ignore[arg-type]
    assert sum(storage.count_by_state().values()) == 0


def test_the_queue_is_stored_on_every_accept_path(storage: Storage) -> None:
    now = storage.now()
    longest = "q" * 255
    storage.add_jobs([job("one", now, queue="emails")])  # the one-job statement
    storage.add_jobs([job(f"m{n}", now, queue=longest) for n in range(1500)])  # two pages
    assert [storage.get_job(i).queue for i in ("one", "m0", "m1499")] == [  # type: ignore[union-attr]
        "emails",
        longest,
        longest,
    ]
    storage.pause(QUEUE, longest, "", "")
    assert storage.count_by_state()[JobState.HELD] == 1500


def test_a_manual_trigger_of_a_paused_task_is_held(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("r", now + 3600), "create")
    record = storage.get_recurring("r")
    assert record is not None
    storage.pause(TASK, "tasks.report", "", "")
    fired = job("r@manual", now - 1, task="tasks.report")
    assert storage.trigger_recurring("r", record.version, ManualFiring(now, "[]", fired)) is True
    assert state_of(storage, "r@manual") is JobState.HELD
    assert storage.next_due_at() is None


def test_held_jobs_are_neither_finished_nor_purged(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1)])
    storage.pause(TASK, "tasks.mail", "", "")
    with pytest.raises(InvalidArgumentError, match="not held"):
        storage.purge_finished([JobState.HELD], now + 10, 10)
    with pytest.raises(InvalidArgumentError):
        storage.finished_counts(JobState.HELD, now - 60, 60)
    assert state_of(storage, "a") is JobState.HELD


# -- races ------------------------------------------------------------------------------------

#: Batch sizes the producers cycle through: the one-job statement, one page, two pages in a
#: transaction.
SIZES = (1, 7, 1100)


def test_producers_on_other_connections_never_slip_a_job_past_a_pause_or_a_resume(
    make_storage: MakeStorage,
) -> None:
    # Given producers, each a storage of its own (its own connections), accepting jobs of one
    # task as fast as they can in batches of every size
    producers = [make_storage(pool_size=2) for _ in range(3)]
    admin = make_storage(pool_size=2)
    stop = threading.Event()
    added = [0] * len(producers)
    failures: list[BaseException] = []

    def produce(k: int) -> None:
        store, batch = producers[k], 0
        now = store.now()
        try:
            while not stop.is_set():
                size = SIZES[batch % len(SIZES)]
                store.add_jobs([job(f"p{k}-{batch}-{n}", now - 1) for n in range(size)])
                added[k] += size
                batch += 1
        except BaseException as exc:
            failures.append(exc)

    def scheduled() -> int:
        return admin.count_by_state()[JobState.SCHEDULED]

    def held() -> int:
        return admin.count_by_state()[JobState.HELD]

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(len(producers))]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):
            wait_until(lambda: scheduled() > 0, timeout=30)
            # When the task is paused while they accept
            admin.pause(TASK, "tasks.mail", "", "")
            # Then from the moment the pause returns no job of it is scheduled, however many
            # are accepted meanwhile
            before = held()
            wait_until(lambda: held() > before, timeout=30)  # noqa: B023 (read at once)
            assert scheduled() == 0
            assert admin.fetch_due_ids(10) == []
            # And a resume while they accept lets every held job go
            admin.resume(TASK, "tasks.mail")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []
    # And none was left held with no pause in force, nor lost
    counts = admin.count_by_state()
    assert (counts[JobState.HELD], counts[JobState.SCHEDULED]) == (0, sum(added))


# -- PostgreSQL: the release in one transaction ------------------------------------------------


def pause_waiting_for_a_lock(store: SQLStorage) -> bool:
    """Whether a session's ``LOCK TABLE`` of the store's jobs waits for another's lock."""
    with psycopg.connect(POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s",
            (f"LOCK TABLE {store._tables.jobs.name} %",),
        ).fetchone()
    return bool(row and row[0])


@postgresql_only
def test_a_chunk_given_back_while_a_pause_waits_for_it_is_held(storage: Storage) -> None:
    assert isinstance(storage, PostgreSQLStorage)
    pg = storage
    now = pg.now()
    pg.add_jobs([job("sent", now - 3), job("back", now - 2), job("later", now - 1)])
    paused: list[int] = []
    pauser = threading.Thread(target=lambda: paused.append(pg.pause(TASK, "tasks.mail", "", "")))

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        # the pause starts while the chunk's transaction is open, and waits for it
        pauser.start()
        wait_until(lambda: pause_waiting_for_a_lock(pg), timeout=1, interval=0.01)
        by_id = {claim.id: claim for claim in claims}
        settlement.unclaim([by_id["back"]], "broker down")
        settlement.back_off([by_id["later"]], "refused", 1.0)

    lock = take_lock(pg)
    claims = pg.release_in_transaction(["sent", "back", "later"], lock, send)
    pauser.join(timeout=30)
    # Then the sent job is enqueued, and the pause held both given back once the chunk committed
    assert sorted(claim.id for claim in claims) == ["back", "later", "sent"]
    assert paused == [2]
    assert [state_of(pg, i) for i in ("sent", "back", "later")] == [
        JobState.ENQUEUED,
        JobState.HELD,
        JobState.HELD,
    ]
    # And a chunk of held jobs claims nothing
    assert pg.release_in_transaction(["back", "later"], lock, lambda c, s: None) == []


@postgresql_only
def test_a_chunk_given_back_under_a_pause_of_another_queue_is_scheduled(storage: Storage) -> None:
    # Given a pause in force that holds none of a chunk's jobs
    assert isinstance(storage, PostgreSQLStorage)
    pg = storage
    pg.add_jobs([job("a", pg.now() - 1)])
    assert pg.pause(QUEUE, "elsewhere", "", "") == 0  # a pause in force holding none of them

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        settlement.unclaim(claims, "broker down")

    # When the chunk is given back, then it is due again at once
    assert [c.id for c in pg.release_in_transaction(["a"], take_lock(pg), send)] == ["a"]
    assert state_of(pg, "a") is JobState.SCHEDULED
    assert pg.fetch_due_ids(10) == ["a"]


# -- PostgreSQL: plans --------------------------------------------------------------------------


@postgresql_only
def test_the_due_reads_never_walk_held_jobs(storage: Storage) -> None:
    # Given 20,000 held jobs, all due, and a few scheduled ones
    assert isinstance(storage, SQLStorage)
    pg = storage
    jobs = pg._tables.jobs.name
    insert_and_analyze(
        pg,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, 't', '{}', n, CASE WHEN n <= 20000 THEN 'held' "
        "ELSE 'scheduled' END, 0, 0, 0 FROM generate_series(1, 20050) AS n",
    )
    lock = take_lock(pg)
    claim = {"lock_name": LOCK, "lock_owner": "scheduler-a", "lock_token": lock.token}
    cases: list[tuple[sa.ClauseElement, dict[str, Any]]] = [
        (pg._sql.fetch_due, {"limit": 100}),
        (pg._sql.claim_due, {**claim, "lease": 30.0, "limit": 100}),
        (pg._sql.next_due_at, {}),
        (pg._sql.next_work_at, {}),
    ]
    # Then every read of the due set walks the due index, which holds scheduled jobs only
    for statement, params in cases:
        plan = explain(pg, statement, pg._dialect.due_scan_settings, **params)
        assert f"using {pg._prefix}_jobs_due " in plan, plan
        assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
    # And listing the held jobs walks their own index
    query = JobQuery(state=JobState.HELD)
    plan = explain(
        pg, page_statement(pg._tables.jobs, query), pg._dialect.due_scan_settings,
        **page_params(query, 50),
    )  # fmt: skip
    assert f"using {pg._prefix}_jobs_held " in plan and "Sort" not in plan, plan
    assert [c.id for c in pg.claim_due(100, lock, 30)][:2] == ["j20001", "j20002"]


def _due_read_buffers(store: SQLStorage) -> int:
    """Shared buffers the first read of the 10 earliest due ids touches, by PostgreSQL's own
    count (the plan's top node: its first ``Buffers`` line)."""
    compiled = store._sql.fetch_due.compile(dialect=store._engine.dialect)
    with store._engine.connect() as conn:
        lines = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, BUFFERS) {compiled}", {**compiled.params, "limit": 10}
        ).scalars()
        found = next(
            m for line in lines if (m := re.search(r"shared hit=(\d+)(?: read=(\d+))?", line))
        )
    return int(found.group(1)) + int(found.group(2) or 0)


@pytest.fixture
def own_database() -> Iterator[PostgreSQLStorage]:
    """A store in a database of its own, created for the test: a vacuum there removes what no
    transaction of *that* database can still see, whatever other tests keep open in theirs
    (PostgreSQL keeps a dead row while any transaction of its database might read it)."""
    name = f"ps_vacuum_{uuid.uuid4().hex[:12]}"
    admin = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    store = PostgreSQLStorage(POSTGRESQL_URL.rsplit("/", 1)[0] + f"/{name}", prefix="vac")
    try:
        store.setup()
        yield store
    finally:
        store.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.postgresql
@pytest.mark.parametrize("vacuum_after", [10_000, 10**9])
def test_a_big_pause_leaves_no_old_entries_for_the_release_to_walk(
    own_database: PostgreSQLStorage, monkeypatch: pytest.MonkeyPatch, vacuum_after: int
) -> None:
    # Given 12,000 due jobs of a task, earlier than a few of another task
    storage = own_database
    monkeypatch.setattr(plumbing_module, "VACUUM_AFTER", vacuum_after)
    jobs = storage._tables.jobs.name
    insert_and_analyze(
        storage,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, CASE WHEN n <= 12000 THEN 'tasks.big' ELSE 't' END, "
        "'{}', n, 'scheduled', 0, 0, 0 FROM generate_series(1, 12010) AS n",
    )
    # When the task is paused
    assert storage.pause(TASK, "tasks.big", "", "") == 12_000
    # Then reading the due set touches a page or two, not the held jobs' old entries (which
    # it walks, every one, when the pause leaves the clean-up to autovacuum: the check fails)
    touched = _due_read_buffers(storage)
    if vacuum_after == 10_000:
        assert touched < 20, touched
    else:
        assert touched > 100, touched
    assert storage.fetch_due_ids(3) == ["j12001", "j12002", "j12003"]


@pytest.mark.postgresql
@pytest.mark.parametrize("vacuum_after", [10_000, 10**9])
def test_a_pass_that_deferred_many_jobs_leaves_no_old_entries_to_walk(
    own_database: PostgreSQLStorage, monkeypatch: pytest.MonkeyPatch, vacuum_after: int
) -> None:
    # Given 12,000 due jobs of a queue limited to one an hour, earlier than a few others
    storage = own_database
    monkeypatch.setattr(plumbing_module, "VACUUM_AFTER", vacuum_after)
    jobs = storage._tables.jobs.name
    insert_and_analyze(
        storage,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at, queue) SELECT 'j' || n, 't', '{}', n, 'scheduled', 0, 0, 0, "
        "CASE WHEN n <= 12000 THEN 'limited' ELSE 'free' END FROM generate_series(1, 12010) AS n",
    )
    storage.set_rate_limit(PauseKind.QUEUE, "limited", 1, 3600.0, 1, "test")
    # When one release pass gives them their slots (an hour apart: all but one wait)
    sent: list[str] = []
    dispatcher = CallableDispatcher(lambda task, args, kwargs, options, job_id: sent.append(job_id))
    scheduler = DelayedJobScheduler(storage, dispatcher, Settings(batch_size=20_000))
    try:
        stats = scheduler.run_once()
    finally:
        scheduler.close()
    # (the one slot free now went to whichever chunk reserved first: chunks run in parallel)
    assert stats.deferred == 11_999 and len(sent) == 11
    assert {f"j{n}" for n in range(12001, 12011)} <= set(sent)
    # Then reading the due set touches a page or two, not their old entries (which it walks,
    # every one, when the pass leaves the clean-up to autovacuum: the check fails)
    touched = _due_read_buffers(storage)
    if vacuum_after == 10_000:
        assert touched < 20, touched
    else:
        assert touched > 100, touched
