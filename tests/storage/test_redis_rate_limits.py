"""Rate limits on Redis and on a sharded store, beyond the contract: the script's slots are
``gcra.reserve_slots``'s to the last bit, the stored layout under the hash tag, reservations that
race from many threads (one store, or a sharded store keeping one budget in shard 0), ``defer``'s
index bookkeeping, and claims that carry their job's queue on every claim path."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from redis.crc import key_slot

import storage_adapters
from storage_adapters import (
    ClaimedJob,
    InvalidArgumentError,
    JobState,
    NewJob,
    PauseKind,
    Storage,
)
from storage_adapters.gcra import reserve_slots
from storage_adapters.redis.storage import RedisStorage
from storage_adapters.sharding import shard_of, shard_prefix
from tests.conftest import REDIS_URL, unique_prefix
from tests.shard_stores import drop_shards
from tests.storage import test_redis_specific as base
from tests.storage.test_redis_specific import LOCK, _list_broker

pytestmark = pytest.mark.redis

# the Redis store's fixtures, shared with the other Redis-only tests
raw, prefix, store = base.raw, base.prefix, base.store

TASK, QUEUE = PauseKind.TASK, PauseKind.QUEUE
SHARDS = 4


@pytest.fixture
def sharded(raw: redis.Redis) -> Iterator[Storage]:
    """A Redis store of ``SHARDS`` shards under a new prefix; dropped afterwards."""
    name = unique_prefix()
    made = storage_adapters.from_url(REDIS_URL, prefix=name, shards=SHARDS)
    made.setup()
    yield made
    made.close()
    drop_shards(REDIS_URL, name, SHARDS)


def claimed(store: Storage, jobs: list[NewJob]) -> list[ClaimedJob]:
    """``jobs`` added due and claimed under a fresh lock."""
    store.add_jobs(jobs)
    lock = store.acquire_lock(LOCK, "claimer", 60)
    assert lock is not None
    return store.claim_due(len(jobs) + 10, lock, 60)


# -- the reservation script ------------------------------------------------------------------


@pytest.mark.parametrize(("count", "period", "burst"), [(7, 0.3, 3), (1, 86_400.0, 1), (10, 1, 4)])
def test_the_script_reserves_exactly_the_slots_gcra_computes(
    store: RedisStorage, count: int, period: float, burst: int
) -> None:
    # Given a limit
    store.set_rate_limit(TASK, "tasks.t", count, period, burst, "ops")
    tat = None
    for wanted in (1, 5, 13):
        # When slots are reserved, again and again
        reservation = store.reserve_release_slots(TASK, "tasks.t", wanted)
        assert reservation is not None
        # Then they are gcra.reserve_slots's, bit for bit, from the tat the last one left
        slots, tat = reserve_slots(tat, reservation.now, count, period, burst, wanted)
        assert reservation.slots == tuple(slots)


def test_a_reservation_is_one_script_run(
    store: RedisStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set_rate_limit(QUEUE, "mail", 100, 1.0, 1, "")
    runs: list[str] = []
    real = store._run

    def run(script: str, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        runs.append(script)
        return real(script, keys, args)

    monkeypatch.setattr(store, "_run", run)
    assert store.reserve_release_slots(QUEUE, "mail", 50) is not None
    assert runs == ["reserve_slots"]  # read, slots and the new tat: one atomic step


def test_limits_live_in_one_hash_under_the_hash_tag_and_keep_set_at_and_tat_on_replace(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given a limit set by someone whose name has spaces, then a reservation of it
    store.set_rate_limit(TASK, "tasks.t", 2, 1.0, 1, "ops team a")
    reservation = store.reserve_release_slots(TASK, "tasks.t", 3)
    assert reservation is not None
    key = f"{{{prefix}}}:limits"
    assert key_slot(key.encode()) == key_slot(f"{{{prefix}}}:schedule".encode())
    before = raw.hget(key, "task:tasks.t")
    assert before is not None
    # When its numbers and set_by are replaced
    store.set_rate_limit(TASK, "tasks.t", 5, 2.0, 2, "someone else")
    # Then set_at and the reserved slots are kept, the rest is new
    after = raw.hget(key, "task:tasks.t")
    assert after is not None
    assert str(after).split(" ")[3:5] == str(before).split(" ")[3:5]
    (limit,) = store.list_rate_limits()
    assert (limit.count, limit.period, limit.burst, limit.set_by) == (5, 2.0, 2, "someone else")
    # free_at: tat (1 s past the last slot) less (burst - 1) intervals of the new limit
    assert limit.free_at == pytest.approx(reservation.slots[-1] + 0.5 - 0.4)
    assert raw.hlen(key) == 1


def test_a_hand_edited_limit_is_skipped_by_the_listing_and_not_reserved(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    store.set_rate_limit(QUEUE, "ok", 1, 1.0, 1, "")
    raw.hset(f"{{{prefix}}}:limits", "queue:broken", "not a limit")
    raw.hset(f"{{{prefix}}}:limits", "nokind:x", "1 1.0 1 1 - ")
    assert [limit.name for limit in store.list_rate_limits()] == ["ok"]
    assert store.reserve_release_slots(QUEUE, "broken", 1) is None


def test_reservations_racing_on_one_store_never_share_a_slot(store: RedisStorage) -> None:
    store.set_rate_limit(QUEUE, "mail", 1000, 1.0, 1, "")
    assert_one_budget(store, 1e-3)


def test_a_sharded_store_keeps_one_budget_in_shard_0(sharded: Storage, raw: redis.Redis) -> None:
    # Given a limit set through a sharded store
    sharded.set_rate_limit(QUEUE, "mail", 1000, 1.0, 1, "ops")
    home = sharded.shards[0]  # type: ignore[attr-defined]
    # Then it is in shard 0 alone
    prefixes = [shard._prefix for shard in sharded.shards]  # type: ignore[attr-defined]
    assert raw.exists(f"{{{prefixes[0]}}}:limits") == 1
    assert not any(raw.exists(f"{{{p}}}:limits") for p in prefixes[1:])
    assert [limit.name for limit in home.list_rate_limits()] == ["mail"]
    assert [limit.name for limit in sharded.list_rate_limits()] == ["mail"]
    # And racing reservations through the sharded store spend that one budget
    assert_one_budget(sharded, 1e-3)
    assert sharded.remove_rate_limit(QUEUE, "mail") is True
    assert sharded.reserve_release_slots(QUEUE, "mail", 1) is None
    assert prefixes[1] == shard_prefix(prefixes[0], 1)


def assert_one_budget(store: Storage, interval: float) -> None:
    """Four threads released together by a Barrier each reserve 25 slots of limit queue:mail
    (``interval`` apart, burst 1) 10 times: every slot is distinct and one interval from the
    next, so no two reservations spent one slot."""
    threads, rounds, wanted = 4, 10, 25
    barrier = threading.Barrier(threads)
    found: list[float] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def reserve() -> None:
        try:
            barrier.wait()
            for _ in range(rounds):
                reservation = store.reserve_release_slots(QUEUE, "mail", wanted)
                assert reservation is not None
                with guard:
                    found.extend(reservation.slots)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    workers = [threading.Thread(target=reserve) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    slots = sorted(found)
    assert len(slots) == len(set(slots)) == threads * rounds * wanted
    gaps = [later - earlier for earlier, later in itertools.pairwise(slots)]
    assert min(gaps) >= interval - 1e-6  # the doubles of epoch seconds are 0.2 us apart


def test_bad_input_is_refused_before_anything_is_written(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    for call in (
        lambda: store.set_rate_limit(TASK, "t", 0, 1.0, 1, ""),
        lambda: store.set_rate_limit(TASK, "t", 1, float("nan"), 1, ""),
        lambda: store.reserve_release_slots(TASK, "t", 0),
        lambda: store.defer([], [1.0], "note"),
        lambda: store.defer([], [], 3),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgumentError):
            call()
    assert not raw.exists(f"{{{prefix}}}:limits")


# -- defer -----------------------------------------------------------------------------------


def test_defer_gives_claims_back_due_at_their_own_slots_with_every_index_updated(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given three claimed jobs, one with an envelope
    now = store.now()
    claims = claimed(
        store,
        [
            NewJob("a", "tasks.t", "{}", now - 3, "q\nmsg", "mail"),
            NewJob("b", "tasks.t", "{}", now - 2),
            NewJob("c", "tasks.t", "{}", now - 1),
        ],
    )
    stale = ClaimedJob("c", "tasks.t", "{}", now - 1, 1, claims[2].token + 1)
    # When two are deferred to slots in the future, and the third under a stale token
    dues = [now + 50, now + 20, now + 5]
    done = store.defer([claims[0], claims[1], stale], dues, "waits for queue mail")
    # Then the two are Scheduled at their slots, in every index, their attempt uncounted
    assert done == ["a", "b"]
    k = f"{{{prefix}}}"
    for job_id, due in (("a", now + 50), ("b", now + 20)):
        fields = raw.hgetall(f"{k}:job:{job_id}")
        assert fields["state"] == "scheduled"
        assert float(fields["due_at"]) == due
        assert fields["attempts"] == "0"
        assert fields["last_error"] == "waits for queue mail"
        assert float(fields["slot_at"]) == due  # the slot it holds when claimed again
        assert "claim_token" not in fields and "lease_until" not in fields
        assert raw.zscore(f"{k}:schedule", job_id) == due
        assert raw.zscore(f"{k}:all", job_id) == due
        assert raw.zscore(f"{k}:claimed", job_id) is None
        assert raw.zscore(f"{k}:state:claimed", job_id) is None
    assert raw.hget(f"{k}:job:a", "envelope") == "q\nmsg"  # sent as it was when its slot comes
    # And the stale claim was left alone
    assert raw.hget(f"{k}:job:c", "state") == "claimed"
    assert raw.zscore(f"{k}:claimed", "c") is not None
    assert store.defer([], [], "x") == []
    # And claimed again (here: by hand, at once), each carries the slot it holds
    raw.zadd(f"{k}:schedule", {"a": now - 1, "b": now - 1})
    lock = store.acquire_lock("another-lock", "claimer", 60)
    assert lock is not None
    again = {c.id: c.slot_at for c in store.claim_due(10, lock, 60)}
    assert again == {"a": now + 50, "b": now + 20}


def test_defer_holds_a_claim_whose_task_is_paused(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    claims = claimed(
        store, [NewJob("p", "tasks.p", "{}", now - 1), NewJob("q", "tasks.q", "{}", now - 1)]
    )
    store.pause(TASK, "tasks.p", "", "ops")
    assert sorted(store.defer(claims, [now + 9, now + 9], "rate")) == ["p", "q"]
    assert store.get_job("p").state is JobState.HELD  # type: ignore[union-attr]
    assert raw.zscore(f"{{{prefix}}}:state:held", "p") == now + 9
    assert raw.zscore(f"{{{prefix}}}:schedule", "p") is None
    assert raw.zscore(f"{{{prefix}}}:schedule", "q") == now + 9


def test_a_sharded_defer_settles_each_claim_on_its_own_shard(sharded: Storage) -> None:
    now = sharded.now()
    jobs = [NewJob(f"j{n}", "tasks.t", "{}", now - 1, queue=f"q{n % 2}") for n in range(12)]
    assert len({shard_of(job.id, SHARDS) for job in jobs}) > 1
    claims = claimed(sharded, jobs)
    assert {claim.id: claim.queue for claim in claims} == {job.id: job.queue for job in jobs}
    dues = [now + 30 + n for n in range(len(claims))]
    assert sorted(sharded.defer(claims, dues, "rate")) == sorted(job.id for job in jobs)
    for claim, due in zip(claims, dues, strict=True):
        record = sharded.get_job(claim.id)
        assert record is not None
        assert (record.state, record.due_at, record.attempts) == (JobState.SCHEDULED, due, 0)
    with pytest.raises(InvalidArgumentError):
        sharded.defer(claims, dues[:1], "rate")


# -- claims carry the queue ------------------------------------------------------------------


def test_every_claim_path_carries_the_jobs_queue(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    store.add_jobs(
        [
            NewJob("one", "t", "{}", now - 9, queue="mail"),
            NewJob("many", "t", "{}", now - 8, queue="bulk"),
            NewJob("plain", "t", "{}", now - 7),
        ]
    )
    lock = store.acquire_lock(LOCK, "a", 60)
    assert lock is not None
    one = store.claim("one", lock, 60)
    assert one is not None and one.queue == "mail"
    assert [(c.id, c.queue) for c in store.claim_due(10, lock, 60)] == [
        ("many", "bulk"),
        ("plain", None),
    ]
    db, broker = _list_broker(raw)
    listed = f"{prefix}-list"
    try:
        store.add_jobs(
            [
                NewJob("moved", "t", "{}", now - 2, f"{listed}\nm", "mail"),
                NewJob("kept", "t", "{}", now - 1, queue="bulk"),
            ]
        )
        moved, kept = store.release_to_lists(10, lock, 60, db)
        assert [(c.id, c.queue) for c in moved] == [("moved", "mail")]
        assert [(c.id, c.queue, c.envelope, c.slot_at) for c in kept] == [
            ("kept", "bulk", None, None)
        ]
    finally:
        broker.delete(listed)
        broker.close()
