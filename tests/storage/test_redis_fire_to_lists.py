"""Firing recurring jobs straight onto a Redis-list broker on the store's own server
(``fire_recurring_to_lists``): a new firing that is due and carries an envelope is pushed and
Enqueued in the firing's own script; the others are stored Scheduled as by
``fire_recurring_many``; a repeated tick pushes nothing; a stale lease writes nothing."""

from __future__ import annotations

import pytest
import redis

from storage_adapters import (
    Firing,
    InvalidArgumentError,
    JobState,
    ListFiringStorage,
    LockLease,
    NewJob,
    PlannedFiring,
)
from storage_adapters.redis.storage import RedisStorage
from tests.storage import test_redis_specific as base
from tests.storage.test_redis_specific import _broker, _list_broker, _list_db, recurring

pytestmark = pytest.mark.redis

# the Redis store's fixtures, shared with the other Redis-only tests
raw, prefix, store = base.raw, base.prefix, base.store

RECURRING_LOCK = "recurring-scheduler"


def planned(store: RedisStorage, rid: str, jobs: list[NewJob], next_run_at: float) -> PlannedFiring:
    record = store.get_recurring(rid)
    assert record is not None
    last = max(job.due_at for job in jobs)
    firing = Firing(next_run_at, last, "[]", tuple(jobs))
    return PlannedFiring(rid, record.version, firing)


def test_due_firings_with_envelopes_go_to_their_lists_and_the_rest_are_scheduled(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given three recurring jobs whose firings are: due with an envelope, due without one,
    # and not yet due (with an envelope)
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    now = store.now()
    for rid in ("a", "b", "c"):
        store.save_recurring(recurring(rid, now - 1), "create")
    chunk = [
        planned(store, "a", [NewJob("a@1", "t", "{}", now - 1, f"{queue}\nmessage-a")], now + 60),
        planned(store, "b", [NewJob("b@1", "t", "{}", now - 1)], now + 60),
        planned(store, "c", [NewJob("c@1", "t", "{}", now + 3600, f"{queue}\nm-c")], now + 7200),
    ]
    assert isinstance(store, ListFiringStorage)
    lock = store.acquire_lock(RECURRING_LOCK, "me", 30)
    assert lock is not None
    try:
        # When the chunk is fired towards the broker's database
        flags, pushed = store.fire_recurring_to_lists(lock, chunk, db)
        # Then every firing is created, the due enveloped one is in its list and Enqueued
        assert flags == [[True], [True], [True]]
        assert [(job.id, job.attempts, job.payload) for job in pushed] == [("a@1", 1, "")]
        assert broker.lrange(queue, 0, -1) == ["message-a"]
        states = {i: store.get_job(i).state for i in ("a@1", "b@1", "c@1")}  # type: ignore[union-attr]
        assert states == {
            "a@1": JobState.ENQUEUED,
            "b@1": JobState.SCHEDULED,
            "c@1": JobState.SCHEDULED,
        }
        counts = store.count_by_state()
        assert (counts[JobState.ENQUEUED], counts[JobState.SCHEDULED]) == (1, 2)
        # the pushed one is not in the due set: a release pass finds only the unsent one
        assert [j.id for j in store.claim_due(10, store.acquire_lock("d", "me", 30), 30)] == [  # type: ignore[arg-type]
            "b@1"
        ]
        # And the recurring jobs moved on
        assert store.get_recurring("a").next_run_at == pytest.approx(now + 60)  # type: ignore[union-attr]
        # When the same tick is fired again (a retry after a lost reply), from the new version
        again = [planned(store, "a", [NewJob("a@1", "t", "{}", now - 1, f"{queue}\nx")], now + 60)]
        flags, pushed = store.fire_recurring_to_lists(lock, again, db)
        # Then it existed: nothing created, nothing pushed twice
        assert (flags, pushed) == ([[False]], [])
        assert broker.llen(queue) == 1
    finally:
        broker.delete(queue)
        broker.close()


def test_a_stale_lease_writes_and_pushes_nothing(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    db = _list_db(raw)
    queue = f"{prefix}-q"
    now = store.now()
    store.save_recurring(recurring("a", now - 1), "create")
    chunk = [planned(store, "a", [NewJob("a@1", "t", "{}", now - 1, f"{queue}\nm")], now + 60)]
    stale = LockLease(RECURRING_LOCK, "me", 999, now + 30)
    assert store.fire_recurring_to_lists(stale, chunk, db) == ([None], [])
    assert _broker(raw, db).llen(queue) == 0
    assert store.get_job("a@1") is None


def test_a_list_key_of_another_type_leaves_its_firings_scheduled(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    broker.set(queue, "not a list")
    now = store.now()
    store.save_recurring(recurring("a", now - 1), "create")
    chunk = [planned(store, "a", [NewJob("a@1", "t", "{}", now - 1, f"{queue}\nm")], now + 60)]
    lock = store.acquire_lock(RECURRING_LOCK, "me", 30)
    assert lock is not None
    try:
        assert store.fire_recurring_to_lists(lock, chunk, db) == ([[True]], [])
        assert store.get_job("a@1").state is JobState.SCHEDULED  # type: ignore[union-attr]
        assert broker.get(queue) == "not a list"
    finally:
        broker.delete(queue)
        broker.close()


def test_a_bad_database_number_is_refused(store: RedisStorage) -> None:
    lock = store.acquire_lock(RECURRING_LOCK, "me", 30)
    assert lock is not None
    for bad in (-1, True, "3"):
        with pytest.raises(InvalidArgumentError):
            store.fire_recurring_to_lists(lock, [], bad)  # type: ignore[arg-type]
