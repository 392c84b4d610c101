"""Shards (storage_adapters/sharding.py): where a job lives, and the recorded shard count that
keeps every process of one store on the same count. The contract suite runs on sharded stores
as adapter kinds ``*-sharded``; this file checks what only sharding has."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

import storage_adapters
from storage_adapters import (
    InvalidArgumentError,
    InvalidIdentifierError,
    JobState,
    NewJob,
    NewRecurring,
    Storage,
    StorageConfigurationError,
    list_jobs,
    shard_of,
    shards_of,
)
from storage_adapters.sharding import MAX_SHARDS, shard_key
from tests.conftest import unique_prefix
from tests.storage.due_jobs import fire_one

OpenStore = Callable[[int], Storage]


@pytest.fixture
def open_store(adapter_url: str) -> Iterator[OpenStore]:
    """Opens stores with a given shard count under one new prefix; all closed, then dropped."""
    prefix = unique_prefix()
    stores: list[Storage] = []

    def opened(shards: int) -> Storage:
        store = storage_adapters.from_url(adapter_url, prefix=prefix, shards=shards)
        stores.append(store)
        return store

    yield opened
    for store in stores:
        store.close()
    for shards in {len(shards_of(store)) for store in stores}:
        cleaner = storage_adapters.from_url(adapter_url, prefix=prefix, shards=shards)
        cleaner.drop()
        cleaner.close()


def job(job_id: str, due_at: float) -> NewJob:
    return NewJob(id=job_id, task="tasks.t", payload="{}", due_at=due_at)


# -- where a job lives -----------------------------------------------------------------------


def test_a_jobs_shard_is_crc32_of_its_id_and_a_firing_goes_with_its_recurring_job() -> None:
    # the oracle is the documented formula, computed here by hand
    for job_id in ("a", "job-1", "user@example.com-welcome", "é"):
        assert shard_of(job_id, 16) == zlib.crc32(job_id.encode()) % 16
    assert shard_key("nightly@2026-11-30T02:00:00Z") == "nightly"
    assert shard_key("nightly@trigger-2026-11-30T02:00:00.123456Z") == "nightly"
    assert shard_of("nightly@2026-11-30T02:00:00Z", 16) == shard_of("nightly", 16)
    assert shard_key("user@example.com") == "user@example.com"  # not a firing: the whole id
    assert all(shard_of(f"j{i}", 1) == 0 for i in range(100))


def test_ids_spread_evenly_over_the_shards() -> None:
    counts = Counter(shard_of(f"order-{i}", 16) for i in range(16_000))
    assert sorted(counts) == list(range(16))
    assert max(counts.values()) < 1.1 * 1000 and min(counts.values()) > 0.9 * 1000


@pytest.mark.parametrize("shards", [0, -1, MAX_SHARDS + 1, 2.0, True, "4"])
def test_a_bad_shard_count_is_refused_before_connecting(shards: object) -> None:
    with pytest.raises(InvalidArgumentError, match="shards must be an integer from 1 to"):
        storage_adapters.from_url("redis://127.0.0.1:1/0", shards=shards)  # type: ignore[arg-type]


def test_a_prefix_too_long_to_name_its_shards_is_refused() -> None:
    with pytest.raises(InvalidIdentifierError, match="too long to name shard"):
        storage_adapters.from_url("sqlite:///unused.db", prefix="p" * 38, shards=16)


def test_each_job_is_stored_in_its_own_shard_only(open_store: OpenStore) -> None:
    store = open_store(4)
    store.setup()
    now = store.now()
    ids = [f"j{i}" for i in range(40)]
    assert store.add_jobs([job(i, now + 60) for i in ids]) == [True] * 40
    shards = shards_of(store)
    for job_id in ids:
        where = [k for k, shard in enumerate(shards) if shard.get_job(job_id) is not None]
        assert where == [shard_of(job_id, 4)]
    assert store.count_by_state()[JobState.SCHEDULED] == 40
    assert [j.id for j in list_jobs(store, None, 100)] == sorted(ids, key=lambda i: (now, i))


def test_a_recurring_job_and_its_firing_share_a_shard(open_store: OpenStore) -> None:
    store = open_store(4)
    store.setup()
    now = store.now()
    record = NewRecurring("nightly", "tasks.t", "{}", '{"cron": "* * * * *"}', True, now - 1)
    store.save_recurring(record, "create")
    lock = store.acquire_lock("recurring-scheduler", "me", 30)
    assert lock is not None
    (due,) = store.fetch_due_recurring(10)
    firing_id = "nightly@2026-11-30T02:00:00Z"
    fired = storage_adapters.Firing(now + 60, now - 1, "[]", (job(firing_id, now - 1),))
    assert fire_one(store, "nightly", due.version, lock, fired) == [True]
    home = shards_of(store)[shard_of("nightly", 4)]
    assert home.get_recurring("nightly") is not None and home.get_job(firing_id) is not None
    stray = storage_adapters.Firing(now + 120, now, "[]", (job("elsewhere-7", now),))
    with pytest.raises(InvalidArgumentError, match="do not fall in recurring job"):
        fire_one(store, "nightly", due.version + 1, lock, stray)
    assert store.get_job("elsewhere-7") is None
    # a trigger's job lands there too, and one with an id that falls elsewhere is refused
    trigger_id = "nightly@trigger-2026-11-30T02:00:00.123456Z"
    triggered = storage_adapters.ManualFiring(now, "[]", job(trigger_id, now))
    after = store.get_recurring("nightly")
    assert after is not None
    assert store.trigger_recurring("nightly", after.version, triggered) is True
    assert home.get_job(trigger_id) is not None
    elsewhere = storage_adapters.ManualFiring(now, "[]", job("elsewhere-7", now))
    with pytest.raises(InvalidArgumentError, match="does not fall in recurring job"):
        store.trigger_recurring("nightly", after.version + 1, elsewhere)
    assert store.get_job("elsewhere-7") is None


# -- the recorded shard count ----------------------------------------------------------------


def test_a_store_refuses_a_process_opened_with_another_shard_count(open_store: OpenStore) -> None:
    # Given a store set up with 4 shards, holding a job
    store = open_store(4)
    store.setup()
    store.add_jobs([job("kept", store.now() + 60)])
    # When a process opens it with the default one shard, or with 8, then set-up refuses
    for shards in (1, 8):
        other = open_store(shards)
        with pytest.raises(StorageConfigurationError, match=r"split into 4 shard\(s\).*shards="):
            other.setup()
    # And the store is as it was
    again = open_store(4)
    again.setup()
    assert again.get_job("kept") is not None
    assert again.count_by_state()[JobState.SCHEDULED] == 1


def test_a_one_shard_store_with_jobs_is_not_opened_sharded(open_store: OpenStore) -> None:
    # Given a store of one shard holding a job
    plain = open_store(1)
    plain.setup()
    plain.add_jobs([job("old", plain.now() + 60)])
    # When it is opened with 4 shards, then set-up refuses and records nothing
    sharded = open_store(4)
    with pytest.raises(StorageConfigurationError, match="already holds jobs kept in one shard"):
        sharded.setup()
    plain.setup()  # still a one-shard store
    assert plain.get_job("old") is not None


def test_a_whole_store_lock_is_held_by_one_process_on_every_shard(open_store: OpenStore) -> None:
    first, second = open_store(4), open_store(4)
    first.setup()
    lease = first.acquire_lock("delayed-scheduler", "a", 30)
    assert lease is not None
    assert second.acquire_lock("delayed-scheduler", "b", 30) is None
    # every shard is held, and a failed attempt left none of them taken by b
    for shard in shards_of(second):
        holder = shard.lock_holder("delayed-scheduler")
        assert holder is not None and holder.owner == "a"
    assert first.release_lock(lease)
    assert second.acquire_lock("delayed-scheduler", "b", 30) is not None
