"""Unique jobs on Redis beyond the contract: the ``unique`` hash is read lazily (a field naming a
finished or missing job is free and overwritten), purging frees the field, a heavier race of
separate clients keeps one job per key, and the sharded store refuses an id outside its key's
shard, writing nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

import storage_adapters
from storage_adapters import (
    InvalidRecordError,
    JobState,
    NewJob,
    Storage,
    UniqueAdd,
    shard_of,
    shards_of,
)
from storage_adapters.redis.storage import RedisStorage
from storage_adapters.sharding import unique_job_id, unique_shard
from tests.conftest import REDIS_URL, unique_prefix
from tests.storage import test_redis_specific as base
from tests.storage.due_jobs import take_lock

pytestmark = pytest.mark.redis

# the Redis store's fixtures, shared with the other Redis-only tests
raw, prefix, store = base.raw, base.prefix, base.store

TASK = "tasks.invoice"
FINISHED = (JobState.ENQUEUED, JobState.CANCELLED)


def unique(job_id: str, key: str, due_at: float, payload: str = "{}") -> NewJob:
    return NewJob(job_id, TASK, payload, due_at, unique_key=key)


def field_of(raw: redis.Redis, prefix: str, key: str) -> str | None:
    """The holder id the ``unique`` hash names for ``key`` of ``TASK``."""
    return raw.hget(f"{{{prefix}}}:unique", f"{TASK}\n{key}")  # type: ignore[return-value]


@pytest.mark.parametrize("ending", ["enqueued", "cancelled", "purged"])
def test_a_stale_field_is_overwritten(
    store: RedisStorage, raw: redis.Redis, prefix: str, ending: str
) -> None:
    now = store.now()
    assert store.add_unique_job(unique("first", "k", now - 1), "keep").created
    if ending == "cancelled":
        assert store.cancel("first")
    else:
        (claim,) = store.claim_due(1, take_lock(store), lease=30)
        assert store.mark_enqueued([claim]) == ["first"]
        if ending == "purged":
            assert store.purge_finished(FINISHED, store.now() + 1, 100) == 1
            assert store.get_job("first") is None
    # the field still names the old job (or nothing, once purged): either way the key is free
    assert field_of(raw, prefix, "k") == (None if ending == "purged" else "first")
    answer = store.add_unique_job(unique("second", "k", now + 60), "replace")
    assert answer == UniqueAdd("second", True, False)
    assert field_of(raw, prefix, "k") == "second"
    record = store.get_job("second")
    assert record is not None and record.state is JobState.SCHEDULED
    assert record.unique_key == "k"


def test_a_field_naming_a_missing_job_is_free(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    raw.hset(f"{{{prefix}}}:unique", f"{TASK}\nk", "gone-by-hand")
    assert store.add_unique_job(unique("new", "k", store.now()), "keep").created


def test_purging_a_job_removes_its_field_only_while_it_names_the_job(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    store.add_unique_job(unique("a", "k1", now - 1), "keep")
    store.add_unique_job(unique("b", "k2", now - 1), "keep")
    assert store.cancel("a") and store.cancel("b")
    store.add_unique_job(unique("c", "k2", now + 60), "keep")  # k2 now names c, still scheduled
    assert store.purge_finished(FINISHED, store.now() + 1, 100) == 2
    assert field_of(raw, prefix, "k1") is None
    assert field_of(raw, prefix, "k2") == "c"
    assert raw.hlen(f"{{{prefix}}}:unique") == 1


def test_eight_clients_racing_on_fifty_keys_make_one_job_per_key(
    store: RedisStorage, prefix: str
) -> None:
    now = store.now()
    clients = [RedisStorage(REDIS_URL, prefix=prefix) for _ in range(8)]
    barrier = threading.Barrier(len(clients))
    answers: list[list[UniqueAdd]] = [[] for _ in clients]

    def add(n: int) -> None:
        barrier.wait()
        for k in range(50):
            job = unique(f"c{n}-k{k}", f"key-{k}", now + 60 + n, payload=f'{{"n": {n}}}')
            answers[n].append(clients[n].add_unique_job(job, "replace" if n % 2 else "keep"))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    assert store.count_by_state()[JobState.SCHEDULED] == 50
    for k in range(50):
        per_key = [answers[n][k] for n in range(len(clients))]
        assert sum(answer.created for answer in per_key) == 1
        assert len({answer.job_id for answer in per_key}) == 1


@pytest.fixture
def sharded() -> Iterator[Storage]:
    name = unique_prefix()
    storage = storage_adapters.from_url(REDIS_URL, prefix=name, shards=3)
    storage.setup()
    yield storage
    storage.drop()
    storage.close()


def test_the_sharded_store_refuses_an_id_outside_the_keys_shard(sharded: Storage) -> None:
    shards = len(shards_of(sharded))
    wanted = unique_shard(TASK, "k", shards)
    stray = next(f"id-{n}" for n in range(100) if shard_of(f"id-{n}", shards) != wanted)
    with pytest.raises(InvalidRecordError, match=r"sharding\.unique_job_id"):
        sharded.add_unique_job(unique(stray, "k", sharded.now()), "keep")
    assert sum(sharded.count_by_state().values()) == 0
    fitting = unique_job_id(TASK, "k", shards)
    assert sharded.add_unique_job(unique(fitting, "k", sharded.now()), "keep").created
    assert shards_of(sharded)[wanted].get_job(fitting) is not None
