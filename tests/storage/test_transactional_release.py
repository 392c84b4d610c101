"""PostgreSQL's ``release_in_transaction``: a chunk claimed, sent and settled in one transaction.

Against the real server: what the claim takes (due, Scheduled, unlocked, under the held lease),
what the settlements write, and that every way the transaction can end without its COMMIT (the
send raising, the session ended under it) leaves the chunk exactly as it was.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from storage_adapters import (
    ChunkSettlement,
    ClaimedJob,
    JobState,
    LockLease,
    NewJob,
    Storage,
    StorageUnavailableError,
    TransactionalReleaseStorage,
    from_url,
)
from storage_adapters.sql.postgresql import PostgreSQLStorage
from tests.conftest import POSTGRESQL_URL

pytestmark = pytest.mark.postgresql

LOCK = "delayed-scheduler"
LIBPQ_URL = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture
def pg(postgresql_storage: Storage) -> PostgreSQLStorage:
    assert isinstance(postgresql_storage, PostgreSQLStorage)
    return postgresql_storage


def add(storage: PostgreSQLStorage, ids: list[str], ahead: float = -10.0) -> None:
    now = storage.now()
    storage.add_jobs(
        [NewJob(job_id, "tasks.t", "{}", now + ahead + n * 0.001) for n, job_id in enumerate(ids)]
    )


def lock_of(storage: PostgreSQLStorage) -> LockLease:
    lock = storage.acquire_lock(LOCK, "a", 60)
    assert lock is not None
    return lock


def state(storage: PostgreSQLStorage, job_id: str) -> tuple[JobState, int, str | None]:
    record = storage.get_job(job_id)
    assert record is not None
    return record.state, record.attempts, record.last_error


def test_postgresql_has_the_ability_and_sqlite_does_not(tmp_path: object) -> None:
    sqlite = from_url(f"sqlite:///{tmp_path}/s.db", prefix="p")
    try:
        assert not isinstance(sqlite, TransactionalReleaseStorage)
    finally:
        sqlite.close()
    assert PostgreSQLStorage.send_budget < 2.0  # inside the idle-in-transaction timeout


def test_the_claim_takes_due_scheduled_jobs_and_the_commit_enqueues_them(
    pg: PostgreSQLStorage,
) -> None:
    # Given due jobs, one not yet due, one cancelled, and one with an envelope
    add(pg, ["a", "b", "c"])
    add(pg, ["later"], ahead=3600)
    add(pg, ["gone"])
    assert pg.cancel("gone")
    pg.add_jobs([NewJob("env", "tasks.t", "{}", pg.now() - 20, envelope="q\nmessage")])
    seen: list[list[ClaimedJob]] = []

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        seen.append(claims)
        # inside the transaction, other sessions still see them Scheduled
        assert state(pg, claims[0].id)[0] is JobState.SCHEDULED

    lock = lock_of(pg)
    claims = pg.release_in_transaction(["c", "a", "b", "later", "gone", "env", "nope"], lock, send)
    # Then only the due, Scheduled ones were claimed, earliest due first, envelope included
    assert [c.id for c in claims] == ["env", "a", "b", "c"] == [c.id for c in seen[0]]
    assert claims[0].envelope == "q\nmessage" and all(c.token == lock.token for c in claims)
    # And the commit made them Enqueued, one attempt each; the rest is untouched
    assert [state(pg, i) for i in ("env", "a", "b", "c")] == [(JobState.ENQUEUED, 1, None)] * 4
    assert state(pg, "later")[0] is JobState.SCHEDULED
    assert state(pg, "gone")[0] is JobState.CANCELLED
    assert pg.fetch_due_ids(10) == []


def test_settlements_expire_and_give_back_inside_the_transaction(pg: PostgreSQLStorage) -> None:
    add(pg, ["a", "b", "c", "d"])

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        settlement.expire(claims[:1], "expired before release")
        settlement.unclaim(claims[1:3], "dispatch failed: boom")

    claims = pg.release_in_transaction(["a", "b", "c", "d"], lock_of(pg), send)
    assert len(claims) == 4
    assert state(pg, "a") == (JobState.EXPIRED, 1, "expired before release")
    assert state(pg, "b") == (JobState.SCHEDULED, 1, "dispatch failed: boom")
    assert state(pg, "d") == (JobState.ENQUEUED, 1, None)
    # the given-back jobs are due again at once
    assert pg.fetch_due_ids(10) == ["b", "c"]


def test_a_row_locked_by_another_session_is_skipped(pg: PostgreSQLStorage) -> None:
    add(pg, ["a", "b"])
    with psycopg.connect(LIBPQ_URL, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute(f"SELECT id FROM {pg._tables.jobs.name} WHERE id = 'a' FOR UPDATE")
        claims = pg.release_in_transaction(["a", "b"], lock_of(pg), lambda c, s: None)
        other.execute("ROLLBACK")
    assert [c.id for c in claims] == ["b"]
    assert state(pg, "a")[0] is JobState.SCHEDULED


def test_a_lease_that_is_no_longer_held_claims_nothing(pg: PostgreSQLStorage) -> None:
    add(pg, ["a"])
    stale = lock_of(pg)
    assert pg.release_lock(stale)
    newer = pg.acquire_lock(LOCK, "b", 60)
    assert newer is not None and newer.token != stale.token

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        raise AssertionError("a fenced claimer must not get to send")

    assert pg.release_in_transaction(["a"], stale, send) == []
    assert state(pg, "a") == (JobState.SCHEDULED, 0, None)


def test_a_send_that_raises_rolls_the_whole_chunk_back(pg: PostgreSQLStorage) -> None:
    add(pg, ["a", "b"])

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        settlement.expire(claims[:1], "expired")
        raise RuntimeError("the dispatcher had a bug")

    lock = lock_of(pg)
    with pytest.raises(RuntimeError, match="bug"):
        pg.release_in_transaction(["a", "b"], lock, send)
    assert [state(pg, i) for i in ("a", "b")] == [(JobState.SCHEDULED, 0, None)] * 2
    # and the storage works on (the thread's connection was given back, not left in a
    # transaction)
    assert len(pg.release_in_transaction(["a", "b"], lock, lambda c, s: None)) == 2


def test_a_session_ended_under_the_send_leaves_the_chunk_scheduled(pg: PostgreSQLStorage) -> None:
    """What a crash of this process, or the server's idle-in-transaction timeout, does to an
    open chunk: the commit fails as the contract's unavailable error, and no write happened."""
    add(pg, ["a", "b"])

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        with psycopg.connect(LIBPQ_URL, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE state = 'idle in transaction' AND datname = current_database() "
                "AND query LIKE %s",
                (f"%{pg._tables.jobs.name}%",),
            ).fetchall()
        assert ended == [(True,)]

    lock = lock_of(pg)
    with pytest.raises(StorageUnavailableError):
        pg.release_in_transaction(["a", "b"], lock, send)
    assert [state(pg, i) for i in ("a", "b")] == [(JobState.SCHEDULED, 0, None)] * 2
    assert len(pg.release_in_transaction(["a", "b"], lock, lambda c, s: None)) == 2


def test_sessions_force_custom_plans(pg: PostgreSQLStorage) -> None:
    # Given the storage's own session (the one the release's claims run on)
    with pg._held_cursor("test") as cursor:
        cursor.execute("SHOW plan_cache_mode")
        (mode,) = cursor.fetchone()
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        (idle,) = cursor.fetchone()
    # Then it plans each statement for its bound values, and still ends idle transactions
    assert mode == "force_custom_plan"
    assert idle == "2s"


def test_a_long_burst_never_claims_with_a_generic_plan(pg: PostgreSQLStorage) -> None:
    # Given a burst due at one instant, released chunk after chunk on one session, as a pool
    # thread of `parallel-scheduler run` does (psycopg prepares the claim after its 5th run)
    now = pg.now()
    ids = [f"j{n:05d}" for n in range(4000)]
    pg.add_jobs([NewJob(job_id, "tasks.t", "{}", now - 1) for job_id in ids])
    lock = lock_of(pg)
    claimed = 0
    for start in range(0, len(ids), 250):
        claimed += len(pg.release_in_transaction(ids[start : start + 250], lock, lambda c, s: None))
    assert claimed == len(ids)
    # Then every claim of that session was planned for its own ids: a generic plan took about a
    # second a chunk on a freshly filled table, so a 50,000-job burst ran at a chunk a second
    with pg._held_cursor("test") as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
            " FROM pg_prepared_statements WHERE statement LIKE 'UPDATE%'"
        )
        generic, custom = cursor.fetchone()
    assert generic == 0
    assert custom >= 10  # the claim was prepared on the server and planned there each run


def _reads(pg: PostgreSQLStorage) -> tuple[int, int, int]:
    """The jobs table's rows updated and read by sequential scans, and the entries read from
    its due index, by every session (pg_stat_user_tables and pg_stat_user_indexes)."""
    table = f"{pg._prefix}_jobs"
    with psycopg.connect(LIBPQ_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT t.n_tup_upd, t.seq_tup_read, i.idx_tup_read FROM pg_stat_user_tables t"
            " JOIN pg_stat_user_indexes i ON i.relid = t.relid"
            " WHERE t.relname = %s AND i.indexrelname = %s",
            (table, f"{table}_due"),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_a_chunk_is_found_by_its_ids_on_a_table_a_burst_just_filled(pg: PostgreSQLStorage) -> None:
    # Given a burst of 20,000 due jobs in a table no ANALYZE has seen since (as after any burst
    # that autovacuum has not caught up with)
    now = pg.now()
    ids = [f"j{n:05d}" for n in range(20_000)]
    for start in range(0, len(ids), 5000):
        pg.add_jobs([NewJob(i, "tasks.t", "{}", now - 1) for i in ids[start : start + 5000]])
    updated, scanned, from_due_index = _reads(pg)
    # When one chunk of 250 of them is claimed, sent and settled, as a pool thread does
    claims = pg.release_in_transaction(ids[:250], lock_of(pg), lambda c, s: None)
    assert len(claims) == 250
    # Then (once the server has counted that transaction) it found them by their primary key:
    # no sequential scan and no walk of the due index, which read every due row per chunk and
    # made a 1,000,000-job burst run at a third of the pace of a 50,000-job one
    deadline = time.monotonic() + 30
    while (now_read := _reads(pg))[0] < updated + 250:
        assert time.monotonic() < deadline, "the server never counted the claim's updates"
        time.sleep(0.1)
    assert now_read[1] - scanned == 0
    assert now_read[2] - from_due_index == 0
