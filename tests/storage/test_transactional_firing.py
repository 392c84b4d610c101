"""PostgreSQL's ``fire_and_send_in_transaction``: a chunk of recurring jobs fired, its due
firings written Enqueued, sent and settled in one transaction.

Against the real server: which firings the send gets (new, due, not held by a pause), what the
commit leaves (Enqueued under the lease's token, the recurring job advanced), what the
settlements write, and that a transaction ended without its COMMIT (the send raising) leaves
neither firings nor an advanced recurring job, so the next pass fires the same tick again.
"""

from __future__ import annotations

import pytest

from storage_adapters import (
    ChunkSettlement,
    ClaimedJob,
    Firing,
    JobState,
    LockLease,
    NewJob,
    NewRecurring,
    PauseKind,
    PlannedFiring,
    Storage,
    TransactionalFiringStorage,
    from_url,
)
from storage_adapters.sql.postgresql import PostgreSQLStorage

pytestmark = pytest.mark.postgresql

LOCK = "recurring-scheduler"


@pytest.fixture
def pg(postgresql_storage: Storage) -> PostgreSQLStorage:
    assert isinstance(postgresql_storage, PostgreSQLStorage)
    return postgresql_storage


def saved(pg: PostgreSQLStorage, rid: str) -> None:
    new = NewRecurring(rid, "tasks.report", "{}", '{"cron": "* * * * *"}', True, pg.now() - 1)
    pg.save_recurring(new, "create")


def planned(pg: PostgreSQLStorage, rid: str, jobs: list[NewJob]) -> PlannedFiring:
    record = pg.get_recurring(rid)
    assert record is not None
    last = max(job.due_at for job in jobs)
    return PlannedFiring(rid, record.version, Firing(pg.now() + 60, last, "[]", tuple(jobs)))


def lock_of(pg: PostgreSQLStorage) -> LockLease:
    lock = pg.acquire_lock(LOCK, "me", 60)
    assert lock is not None
    return lock


def state(pg: PostgreSQLStorage, job_id: str) -> tuple[JobState, int, str | None]:
    record = pg.get_job(job_id)
    assert record is not None, job_id
    return record.state, record.attempts, record.last_error


def test_postgresql_has_the_ability_and_sqlite_does_not(tmp_path: object) -> None:
    sqlite = from_url(f"sqlite:///{tmp_path}/s.db", prefix="p")
    try:
        assert not isinstance(sqlite, TransactionalFiringStorage)
    finally:
        sqlite.close()


def test_due_firings_are_sent_and_enqueued_by_the_commit_the_rest_stored(
    pg: PostgreSQLStorage,
) -> None:
    # Given three recurring jobs whose firings are due, due in a paused queue, and not yet due
    now = pg.now()
    for rid in ("a", "b", "c"):
        saved(pg, rid)
    pg.pause(PauseKind.QUEUE, "stopped", "maintenance", "ops")
    chunk = [
        planned(
            pg,
            "a",
            [NewJob("a@1", "t", "{}", now - 2, "q\nm-a"), NewJob("a@2", "t", "{}", now - 1)],
        ),
        planned(pg, "b", [NewJob("b@1", "t", "{}", now - 1, queue="stopped")]),
        planned(pg, "c", [NewJob("c@1", "t", "{}", now + 3600)]),
    ]
    seen: list[ClaimedJob] = []

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        seen.extend(claims)
        # inside the transaction, other sessions see neither the firings nor the advance
        assert pg.get_job(claims[0].id) is None

    lock = lock_of(pg)
    flags = pg.fire_and_send_in_transaction(lock, chunk, send)
    # Then every firing was new, and the send got only the due ones not held, earliest first,
    # each its first attempt under the lease's token, with its broker message
    assert flags == [[True, True], [True], [True]]
    assert [c.id for c in seen] == ["a@1", "a@2"]
    assert seen[0].envelope == "q\nm-a" and seen[1].envelope is None
    assert all(c.token == lock.token and c.attempts == 1 for c in seen)
    # And the commit left them Enqueued, the paused one Held, the later one Scheduled
    assert state(pg, "a@1") == state(pg, "a@2") == (JobState.ENQUEUED, 1, None)
    assert state(pg, "b@1") == (JobState.HELD, 0, None)
    assert state(pg, "c@1") == (JobState.SCHEDULED, 0, None)
    assert pg.fetch_due_ids(10) == []
    # And each recurring job advanced (a repeated attempt at the same version fires nothing)
    assert pg.fire_and_send_in_transaction(lock, chunk, send) == [None, None, None]
    assert len(seen) == 2


def test_settlements_give_back_what_was_not_sent(pg: PostgreSQLStorage) -> None:
    now = pg.now()
    saved(pg, "a")
    jobs = [NewJob(f"a@{n}", "t", "{}", now - 3 + n) for n in range(3)]

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        settlement.unclaim(claims[:1], "dispatch failed: boom")
        settlement.fail(claims[1:2], "unsendable")

    assert pg.fire_and_send_in_transaction(lock_of(pg), [planned(pg, "a", jobs)], send) == [
        [True, True, True]
    ]
    assert state(pg, "a@0") == (JobState.SCHEDULED, 1, "dispatch failed: boom")
    assert state(pg, "a@1") == (JobState.FAILED, 1, "unsendable")
    assert state(pg, "a@2") == (JobState.ENQUEUED, 1, None)
    assert pg.fetch_due_ids(10) == ["a@0"]  # given back: the delayed scheduler sends it


def test_a_send_that_raises_rolls_back_the_firing_and_the_advance(pg: PostgreSQLStorage) -> None:
    saved(pg, "a")
    before = pg.get_recurring("a")
    assert before is not None
    chunk = [planned(pg, "a", [NewJob("a@1", "t", "{}", pg.now() - 1)])]

    def send(claims: list[ClaimedJob], settlement: ChunkSettlement) -> None:
        raise RuntimeError("the broker went away mid-send")

    lock = lock_of(pg)
    with pytest.raises(RuntimeError, match="mid-send"):
        pg.fire_and_send_in_transaction(lock, chunk, send)
    # nothing happened: the same tick fires again, at the same version
    assert pg.get_job("a@1") is None
    after = pg.get_recurring("a")
    assert after is not None and (after.version, after.next_run_at) == (
        before.version,
        before.next_run_at,
    )
    sent: list[str] = []
    flags = pg.fire_and_send_in_transaction(
        lock, chunk, lambda claims, _: sent.extend(c.id for c in claims)
    )
    assert flags == [[True]] and sent == ["a@1"]


def test_a_lease_no_longer_held_fires_and_sends_nothing(pg: PostgreSQLStorage) -> None:
    saved(pg, "a")
    chunk = [planned(pg, "a", [NewJob("a@1", "t", "{}", pg.now() - 1)])]
    stale = lock_of(pg)
    assert pg.release_lock(stale)
    sent: list[ClaimedJob] = []
    assert pg.fire_and_send_in_transaction(stale, chunk, lambda c, _: sent.extend(c)) == [None]
    assert sent == [] and pg.get_job("a@1") is None


def test_an_existing_firing_is_not_sent_again(pg: PostgreSQLStorage) -> None:
    # a tick fired before (by a scheduler that crashed before advancing its recurring job)
    now = pg.now()
    saved(pg, "a")
    pg.add_jobs([NewJob("a@1", "t", "{}", now - 1)])
    sent: list[str] = []
    chunk = [planned(pg, "a", [NewJob("a@1", "t", "{}", now - 1), NewJob("a@2", "t", "{}", now)])]
    flags = pg.fire_and_send_in_transaction(
        lock_of(pg), chunk, lambda claims, _: sent.extend(c.id for c in claims)
    )
    assert flags == [[False, True]] and sent == ["a@2"]
    assert state(pg, "a@1")[0] is JobState.SCHEDULED  # the delayed scheduler releases it
