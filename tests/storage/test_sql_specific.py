"""SQL-only behaviour the shared contract cannot see: plans, round trips, schema versions, errors.

Runs against the real PostgreSQL server and real SQLite files; every test works under its own
prefix and drops only its own tables.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest
import sqlalchemy as sa
from psycopg.pq import Trace

import storage_adapters
from devtools.waiting import wait_until
from storage_adapters import (
    ClaimedJob,
    Firing,
    JobState,
    LockLease,
    NewJob,
    NewRecurring,
    Storage,
    StorageError,
    StorageUnavailableError,
    from_url,
)
from storage_adapters.sql import tables as sql_tables
from storage_adapters.sql.postgresql import PostgreSQLStorage
from storage_adapters.sql.sqlite import SQLiteStorage
from storage_adapters.sql.storage import SQLStorage
from storage_adapters.sql.tables import MIGRATIONS, build_tables
from tests.conftest import POSTGRESQL_URL, require_server, storage_url, unique_prefix
from tests.storage.due_jobs import LOCK, add_due, fire_one, take_lock
from tests.storage.sql_helpers import explain, insert_and_analyze
from tests.together import together

MakeStorage = Callable[..., Storage]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def adapter_kind(request: pytest.FixtureRequest) -> str:
    """Overrides the shared fixture: these tests concern the SQL adapters only."""
    return str(request.param)


FreshStorage = Callable[[], Storage]


@pytest.fixture
def fresh(adapter_kind: str, tmp_path: Path) -> Iterator[FreshStorage]:
    """A factory of storages on one new prefix that nobody has set up yet."""
    url, prefix = storage_url(adapter_kind, tmp_path), unique_prefix()
    made: list[Storage] = []

    def make() -> Storage:
        made.append(from_url(url, prefix=prefix))
        return made[-1]

    yield make
    if made:
        made[0].drop()
    for store in made:
        store.close()


@pytest.fixture
def pg(make_storage: MakeStorage) -> SQLStorage:
    """Use with ``@postgresql_only``."""
    return sql(make_storage())


postgresql_only = pytest.mark.parametrize(
    "adapter_kind", [pytest.param("postgresql", marks=pytest.mark.postgresql)]
)


def sql(storage: Storage) -> SQLStorage:
    assert isinstance(storage, SQLStorage)
    return storage


def recurring(rid: str, next_run_at: float | None) -> NewRecurring:
    return NewRecurring(rid, "tasks.t", "{}", '{"cron": "* * * * *"}', True, next_run_at)


def firing(rid: str, tick: float, jobs: int = 1) -> Firing:
    new = tuple(NewJob(f"{rid}@{tick:.0f}#{n:04d}", "tasks.t", "{}", tick) for n in range(jobs))
    return Firing(next_run_at=tick + 60, last_run_at=tick, history="[]", jobs=new)


# -- schema ---------------------------------------------------------------------------------


def test_setup_records_each_migration_once(storage: Storage) -> None:
    store = sql(storage)
    store.setup()
    store.setup()
    with store._engine.connect() as conn:
        rows = conn.execute(sa.select(store._tables.schema_version.c.version)).scalars().all()
    assert rows == [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_migrated_schema_matches_the_table_definitions(storage: Storage) -> None:
    store = sql(storage)
    expected = build_tables(store._prefix)
    inspector = sa.inspect(store._engine)
    for table in (expected.jobs, expected.locks, expected.recurring, expected.schema_version):
        columns = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
        assert columns == {c.name: c.nullable for c in table.columns}, table.name
    indexes = {index["name"] for index in inspector.get_indexes(expected.jobs.name)}
    assert {f"{store._prefix}_jobs_due", f"{store._prefix}_jobs_claim_lease"} <= indexes
    indexes = {index["name"] for index in inspector.get_indexes(expected.recurring.name)}
    assert f"{store._prefix}_recurring_due" in indexes


def test_concurrent_setup_of_a_new_prefix_creates_it_once(fresh: FreshStorage) -> None:
    # Given six storages racing to create the same fresh prefix, each on its own connection
    stores = [fresh() for _ in range(6)]
    together(lambda store: store.setup(), stores)
    # Then every migration ran exactly once
    store = sql(stores[0])
    with store._engine.connect() as conn:
        count = sa.select(sa.func.count()).select_from(store._tables.schema_version)
        assert conn.execute(count).scalar() == len(MIGRATIONS)


def test_a_newer_schema_is_refused(storage: Storage) -> None:
    store = sql(storage)
    with store._engine.connect() as conn:
        conn.execute(
            store._tables.schema_version.insert().values(
                version=999, description="from the future", applied_at=0.0
            )
        )
    with pytest.raises(StorageError, match="999"):
        store.setup()


def test_a_version_1_database_upgrades_on_setup(
    fresh: FreshStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a prefix set up by a release that knew only migration 1, holding a job
    store = sql(fresh())
    with monkeypatch.context() as released:
        released.setattr(sql_tables, "MIGRATIONS", MIGRATIONS[:1])
        store.setup()
    now = store.now()
    with store._engine.begin() as conn:  # written as that release wrote it: the v1 columns
        conn.execute(
            sa.text(
                f"INSERT INTO {store._tables.jobs.name} (id, task, payload, due_at, state, "
                "attempts, created_at, updated_at) VALUES ('kept', 'tasks.t', '{}', :due, "
                "'scheduled', 0, :now, :now)"
            ),
            {"due": now + 60, "now": now},
        )
    with pytest.raises(StorageError, match=r"setup\(\)"):
        store.count_recurring()
    # When this release sets it up
    store.setup()
    # Then every later step ran once, the job is still there, and recurring jobs work
    with store._engine.connect() as conn:
        versions = conn.execute(sa.select(store._tables.schema_version.c.version)).scalars()
        assert sorted(versions) == [m.version for m in MIGRATIONS]
    assert store.get_job("kept") is not None
    assert store.save_recurring(recurring("r", now - 1), "create")
    (record,) = store.fetch_due_recurring(10)
    assert fire_one(store, "r", record.version, take_lock(store), firing("r", now)) == [True]


# -- add_jobs -------------------------------------------------------------------------------


def test_a_failure_in_a_later_page_stores_nothing(storage: Storage) -> None:
    # Given a call of three pages whose last page the database rejects
    store = sql(storage)
    now = store.now()
    jobs = [NewJob(f"j{i:05d}", "tasks.t", "{}", now) for i in range(2500)]
    # When it is added, then it fails and the earlier pages were rolled back
    with _rejecting(store, "j02400"), pytest.raises(StorageError, match="rejected"):
        store.add_jobs(jobs)
    assert sum(store.count_by_state().values()) == 0


@contextmanager
def _rejecting(store: SQLStorage, job_id: str) -> Iterator[None]:
    """A trigger that refuses one id: a failure only the database sees, after validation."""
    name = f"{store._tables.jobs.name}_reject"
    jobs = store._tables.jobs.name
    with store._engine.connect() as conn:
        if store._dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {jobs} "
                f"WHEN NEW.id = '{job_id}' BEGIN SELECT RAISE(ABORT, 'rejected'); END"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.id = '{job_id}' THEN RAISE 'rejected'; END IF; RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {jobs} "
                f"FOR EACH ROW EXECUTE FUNCTION {name}()"
            )
    try:
        yield
    finally:
        with store._engine.connect() as conn:
            conn.exec_driver_sql(
                f"DROP TRIGGER {name}" + ("" if store._dialect.name == "sqlite" else f" ON {jobs}")
            )
            if store._dialect.name != "sqlite":
                conn.exec_driver_sql(f"DROP FUNCTION {name}()")


# -- fire_recurring -------------------------------------------------------------------------


def test_a_firing_whose_jobs_fail_leaves_the_recurring_job_unchanged(storage: Storage) -> None:
    # Given a due recurring job whose firing has two pages of jobs, the database rejecting one
    store = sql(storage)
    now = store.now()
    store.save_recurring(recurring("r", now - 1), "create")
    (record,) = store.fetch_due_recurring(10)
    fire = firing("r", now, jobs=1500)
    # When it fires, then it fails, and neither the jobs nor the advance were kept
    with _rejecting(store, fire.jobs[1200].id), pytest.raises(StorageError, match="rejected"):
        fire_one(store, "r", record.version, take_lock(store), fire)
    assert store.get_recurring("r") == record
    assert sum(store.count_by_state().values()) == 0


def test_the_due_recurring_query_uses_its_index_on_sqlite(tmp_path: Path) -> None:
    store = SQLiteStorage(f"sqlite:///{tmp_path / 'plan.db'}", prefix=unique_prefix())
    try:
        store.setup()
        compiled = store._sql.fetch_due_recurring.compile(dialect=store._engine.dialect)
        values = {**compiled.params, "limit": 100}
        params = tuple(values[name] for name in compiled.positiontup or ())
        with store._engine.connect() as conn:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).all()
        plan = "\n".join(str(row[-1]) for row in rows)
        assert f"USING INDEX {store._prefix}_recurring_due" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    finally:
        store.close()


# -- PostgreSQL: plans and round trips --------------------------------------------------------


def fill_with_finished_jobs(
    store: SQLStorage, finished: int, scheduled: int, analyze: bool = True
) -> None:
    """Many enqueued jobs and a few due ones, as a long-running table looks; then ANALYZE."""
    jobs = store._tables.jobs.name
    insert_and_analyze(
        store,
        jobs,
        f"INSERT INTO {jobs} (id, task, payload, due_at, state, attempts, created_at, "
        "updated_at) SELECT 'j' || n, 't', '{}', n, CASE WHEN n <= %(finished)s THEN "
        "'enqueued' ELSE 'scheduled' END, 1, 0, 0 FROM generate_series(1, %(total)s) AS n",
        {"finished": finished, "total": finished + scheduled},
        analyze,
    )


@postgresql_only
def test_due_queries_use_the_partial_due_index(pg: SQLStorage) -> None:
    fill_with_finished_jobs(pg, finished=20_000, scheduled=50)
    lock = take_lock(pg)
    claim = {"lock_name": LOCK, "lock_owner": "a", "lock_token": lock.token, "lease": 30.0}
    due_index = f"{pg._prefix}_jobs_due"
    cases: list[tuple[sa.ClauseElement, dict[str, Any]]] = [
        (pg._sql.fetch_due, {"limit": 100}),
        (pg._sql.claim_due, {**claim, "limit": 100}),
        (pg._sql.next_due_at, {}),
    ]
    for statement, params in cases:
        plan = explain(pg, statement, **params)
        assert f"using {due_index}" in plan, plan
        assert "Seq Scan" not in plan and "Sort" not in plan, plan
    plan = explain(pg, pg._sql.claim, **claim, job_id="j20001")
    assert f"using {pg._prefix}_jobs_pkey" in plan and "Seq Scan" not in plan, plan
    plan = explain(pg, pg._sql.recover, limit=100)
    assert f"using {pg._prefix}_jobs_claim_lease" in plan, plan


@postgresql_only
def test_a_burst_into_a_table_not_yet_analysed_still_walks_the_due_index(pg: SQLStorage) -> None:
    # Given a table that a burst has just filled: 20,000 due jobs, no statistics yet
    fill_with_finished_jobs(pg, finished=0, scheduled=20_000, analyze=False)
    lock = take_lock(pg)
    claim = {"lock_name": LOCK, "lock_owner": "a", "lock_token": lock.token, "lease": 30.0}
    settings = pg._dialect.due_scan_settings
    # Then the due reads, under the settings they run with, walk the index and sort nothing
    for statement, params in [
        (pg._sql.fetch_due, {"limit": 1000}),
        (pg._sql.claim_due, {**claim, "limit": 1000}),
    ]:
        plan = explain(pg, statement, settings, **params)
        assert f"Scan using {pg._prefix}_jobs_due" in plan, plan
        assert "Bitmap" not in plan, plan
        # no due row is sorted; the claim may sort the ids it took (at most ``limit``) to join
        # them back once each, as the planner likes when it expects a handful of them
        sorted_by = [line for line in plan.splitlines() if "Sort Key" in line]
        assert all('"ANY_subquery".id' in line for line in sorted_by), plan
    # And the claim takes the earliest due, as the contract says
    assert [c.id for c in pg.claim_due(3, lock, 30)] == ["j1", "j2", "j3"]


def fill_with_recurring_jobs(store: SQLStorage, count: int, due: int) -> None:
    """Mostly enabled and not yet due, a tenth paused, a seventh ended, ``due`` due; ANALYZE."""
    table = store._tables.recurring.name
    insert_and_analyze(
        store,
        table,
        f"INSERT INTO {table} (id, task, payload, schedule, enabled, next_run_at, history, "
        "version, created_at, updated_at) SELECT 'r' || n, 't', '{}', '{}', mod(n, 10) <> 0, "
        "CASE WHEN mod(n, 7) = 0 THEN NULL WHEN n <= %(due)s THEN n ELSE 4e9 + n END, "
        "'[]', 1, 0, 0 FROM generate_series(1, %(count)s) AS n",
        {"due": due, "count": count},
    )


@postgresql_only
def test_recurring_queries_use_their_indexes(pg: SQLStorage) -> None:
    fill_with_recurring_jobs(pg, count=20_000, due=50)
    plan = explain(pg, pg._sql.fetch_due_recurring, limit=100)
    assert f"using {pg._prefix}_recurring_due" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan and "Filter" not in plan, plan
    lock = take_lock(pg)
    fence = {"lock_name": LOCK, "lock_owner": "a", "lock_token": lock.token}
    fire = {
        "planned_id": ["r1", "r2"],
        "planned_expected_version": [1, 1],
        "planned_next_run_at": [None, None],
        "planned_last_run_at": [None, None],
        "planned_history": ["[]", "[]"],
    }
    plan = explain(pg, pg._sql.fire_recurring_many, **fence, **fire)
    assert f"using {pg._prefix}_recurring_pkey" in plan and "Seq Scan" not in plan, plan


class RoundTrips:
    """Counts the messages that end a request (Sync, Query) on the wire, via libpq's trace."""

    def __init__(self, store: SQLStorage, file: TextIO) -> None:
        self._file = file
        self._path = Path(file.name)
        sa.event.listen(store._engine, "connect", self._trace)
        store._engine.dispose()  # reconnect, traced

    def _trace(self, dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.pgconn.trace(self._file.fileno())
        dbapi_connection.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)

    def of(self, operation: Callable[[], object]) -> int:
        self._file.flush()
        start = self._path.stat().st_size
        operation()
        self._file.flush()
        with self._path.open() as trace:
            trace.seek(start)
            sent = [line.split("\t") for line in trace.read().splitlines()]
        return sum(1 for f in sent if len(f) >= 3 and f[0] == "F" and f[2].split()[0] in _ENDS)


_ENDS = ("Sync", "Query")


@postgresql_only
def test_every_hot_operation_is_one_round_trip(pg: SQLStorage, tmp_path: Path) -> None:
    with (tmp_path / "trace.log").open("w") as trace:
        check_round_trips(pg, RoundTrips(pg, trace))


def check_round_trips(pg: SQLStorage, trips: RoundTrips) -> None:
    pg.now()  # the first connection also asks the server about itself
    now = pg.now()
    jobs = [NewJob(f"j{i:04d}", "tasks.t", "{}", now - 1) for i in range(1000)]
    assert trips.of(lambda: pg.add_jobs(jobs)) == 1
    lock = take_lock(pg)
    # reads of the due set: BEGIN with the planner settings, the statement, COMMIT
    assert trips.of(lambda: pg.fetch_due_ids(10)) == 3
    claims: list[ClaimedJob] = []

    def claim_one() -> None:
        claim = pg.claim("j0000", lock, 30)
        assert claim is not None
        claims.append(claim)

    assert trips.of(claim_one) == 1
    assert trips.of(lambda: claims.extend(pg.claim_due(500, lock, 30))) == 3
    assert trips.of(lambda: pg.mark_enqueued(claims[:100])) == 1
    assert trips.of(lambda: pg.unclaim(claims[100:], "later")) == 1
    assert trips.of(lambda: pg.renew_lock(lock, 30)) == 1
    assert trips.of(pg.recover_expired_claims) == 1
    assert trips.of(pg.next_work_at) == 1  # the scheduler's idle pass is this one peek
    assert trips.of(lambda: pg.add_jobs([*jobs, NewJob("x", "t", "{}", now)])) == 4


@postgresql_only
def test_recurring_operations_round_trips(pg: SQLStorage, tmp_path: Path) -> None:
    with (tmp_path / "trace.log").open("w") as trace:
        trips = RoundTrips(pg, trace)
        pg.now()
        now = pg.now()
        assert trips.of(lambda: pg.save_recurring(recurring("r", now - 1), "create")) == 1
        assert trips.of(lambda: pg.save_recurring(recurring("r", now - 1), "upsert")) == 1
        assert trips.of(lambda: pg.fetch_due_recurring(10)) == 1
        record = pg.get_recurring("r")
        assert record is not None
        lock = take_lock(pg)
        # BEGIN, the chunk's compare-and-sets, its jobs, COMMIT; refused: BEGIN, the
        # compare-and-sets, COMMIT (nothing to insert)
        assert trips.of(lambda: fire_one(pg, "r", record.version, lock, firing("r", now))) == 4
        stale = fire_one(pg, "r", record.version, lock, firing("r", now + 60))
        assert stale is None
        assert trips.of(lambda: fire_one(pg, "r", 0, lock, firing("r", now))) == 3
        assert trips.of(lambda: pg.set_recurring_enabled("r", False, None)) == 1


# -- PostgreSQL: URLs and errors -----------------------------------------------------------------


@pytest.mark.postgresql
@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_every_postgresql_spelling_reaches_psycopg(scheme: str) -> None:
    require_server("postgresql")
    url = scheme + "://" + POSTGRESQL_URL.split("://", 1)[1]
    store = PostgreSQLStorage(url, prefix=unique_prefix())
    try:
        assert store._engine.url.drivername == "postgresql+psycopg"
        assert store.now() > 0
    finally:
        store.close()


@pytest.mark.postgresql
def test_an_unreachable_server_is_unavailable_and_the_password_stays_hidden() -> None:
    store = PostgreSQLStorage("postgresql://scheduler:s3cret-pw@127.0.0.1:1/db", prefix="x")
    with pytest.raises(StorageUnavailableError) as caught:
        store.now()
    message = str(caught.value)
    assert "s3cret-pw" not in message and "scheduler:***@127.0.0.1:1/db" in message
    assert "s3cret-pw" not in repr(store)
    store.close()


def test_a_store_without_setup_says_so(fresh: FreshStorage) -> None:
    with pytest.raises(StorageError, match=r"setup\(\)"):
        fresh().get_job("a")


def test_a_closed_store_refuses_work(make_storage: MakeStorage) -> None:
    make_storage()  # the one the fixture drops at the end
    closed = make_storage()
    closed.close()
    closed.close()
    with pytest.raises(StorageError, match="closed"):
        closed.now()


# -- SQLite: files, WAL and processes ------------------------------------------------------------


def test_sqlite_refuses_in_memory_databases() -> None:
    for url in ("sqlite://", "sqlite:///:memory:"):
        with pytest.raises(ValueError, match="in-memory"):
            SQLiteStorage(url)


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    store = SQLiteStorage(f"sqlite:///{tmp_path / 'wal.db'}")
    try:
        store.setup()
        with store._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 1000
    finally:
        store.close()


def _claim_every_id(url: str, lock: LockLease, ids: list[str]) -> list[str]:
    """Runs in a child process: the claims of one scheduler process."""
    store = SQLiteStorage(url)
    try:
        got = [c.id for i in ids if (c := store.claim(i, lock, 30)) is not None]
        while batch := store.claim_due(7, lock, 30):
            got.extend(c.id for c in batch)
            store.mark_enqueued(batch)
        return got
    finally:
        store.close()


def test_sqlite_processes_queue_for_the_writer_instead_of_failing(tmp_path: Path) -> None:
    # Given one SQLite file with due jobs, and four processes claiming all of them at once
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    store = SQLiteStorage(url)
    store.setup()
    ids = add_due(store, 400)
    lock = take_lock(store)
    store.close()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(4, mp_context=context) as pool:
        results = list(pool.map(_claim_every_id, [url] * 4, [lock] * 4, [ids[::-1]] * 4))
    # Then no process failed and every job was claimed exactly once
    claimed = [i for got in results for i in got]
    assert sorted(claimed) == ids
    check = SQLiteStorage(url)
    assert check.count_by_state()[JobState.SCHEDULED] == 0
    check.close()


def test_a_new_sqlite_file_locked_by_another_connection_is_waited_for(tmp_path: Path) -> None:
    # Given a brand-new SQLite file (not yet in WAL) that another process holds locked for 0.5 s
    path = tmp_path / "fresh.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    releaser = threading.Timer(0.5, holder.rollback)
    releaser.start()
    try:
        # When a storage opens it and sets up (its first connection switches the file to WAL,
        # which SQLite does not retry on its busy handler)
        storage = storage_adapters.from_url(f"sqlite:///{path}", prefix=unique_prefix())
        try:
            storage.setup()
            # Then it waited for the lock instead of failing with "database is locked"
            assert storage.count_by_state() is not None
        finally:
            storage.close()
    finally:
        releaser.join()
        holder.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


# -- a stalled client in a transaction -------------------------------------------------------


@postgresql_only
def test_a_transaction_left_idle_is_ended_and_its_rows_unlocked(pg: SQLStorage) -> None:
    """A scheduler stopped between its claim and the COMMIT (SIGSTOP) must not keep the claimed
    rows locked until it resumes: the server ends its session after the idle-in-transaction
    timeout, the claim is rolled back, and another scheduler claims the jobs."""
    (job_id,) = add_due(pg, 1)
    lock = take_lock(pg)
    stalled = pg._engine.connect()
    try:
        # Given a session that has claimed the job (row locked, not committed) and then stalls
        stalled.exec_driver_sql("BEGIN")
        jobs = pg._tables.jobs
        stalled.execute(jobs.update().where(jobs.c.id == job_id).values(state="claimed"))
        # Then, while it is idle in its transaction, the job cannot be claimed (SKIP LOCKED)
        assert pg.claim_due(10, lock, 30) == []
        # And once the timeout has passed, its session is ended and the job is claimed
        claimed = wait_until(lambda: pg.claim_due(10, lock, 30), timeout=10, interval=0.2)
        assert [c.id for c in claimed] == [job_id]
        with pytest.raises(sa.exc.DBAPIError):
            stalled.exec_driver_sql("COMMIT")
    finally:
        stalled.close()
