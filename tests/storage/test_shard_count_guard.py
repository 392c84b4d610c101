"""A write path opened with another shard count than the store records is refused before it
writes anything (issue 19, section 3): its jobs would sit where no process of the store's count
ever looks, so they would never run."""

from __future__ import annotations

import pytest

import storage_adapters
from parallel_scheduler import Client
from storage_adapters import StorageConfigurationError
from storage_adapters.sharding import shard_prefix
from tests.conftest import unique_prefix
from tests.shard_stores import assert_nothing_written, drop_shards, exists


@pytest.mark.parametrize("shards", [8, 1])
def test_a_client_of_another_shard_count_is_refused_before_writing(
    adapter_url: str, four_shards: str, shards: int
) -> None:
    storage = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=shards)
    with (
        Client(storage=storage) as client,
        pytest.raises(StorageConfigurationError, match="split into 4 shard"),
    ):
        client.schedule("tasks.add", countdown=60)
    storage.close()
    assert_nothing_written(adapter_url, four_shards)


@pytest.mark.parametrize("write", ["cancel", "reschedule"])
def test_a_client_of_another_shard_count_cannot_cancel_or_reschedule(
    adapter_url: str, four_shards: str, write: str
) -> None:
    right = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=4)
    with Client(storage=right) as client:
        job_id = client.schedule("tasks.add", countdown=60).job_id
    wrong = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=8)
    with (
        Client(storage=wrong) as client,
        pytest.raises(StorageConfigurationError, match="split into 4 shard"),
    ):
        if write == "cancel":
            client.cancel(job_id)
        else:
            client.reschedule(job_id, countdown=5)
    wrong.close()
    record = right.get_job(job_id)
    assert record is not None and record.state.value == "scheduled"
    right.close()


def test_a_sharded_client_on_a_store_without_a_recorded_count_is_refused(adapter_url: str) -> None:
    name = unique_prefix()
    one = storage_adapters.from_url(adapter_url, prefix=name)
    one.setup()
    storage = storage_adapters.from_url(adapter_url, prefix=name, shards=8)
    try:
        with (
            Client(storage=storage) as client,
            pytest.raises(StorageConfigurationError, match="no recorded shard count"),
        ):
            client.schedule("tasks.add", countdown=60)
        assert not any(one.count_by_state().values())
    finally:
        storage.close()
        one.drop()
        one.close()


def test_setup_with_another_shard_count_creates_no_shard_store(
    adapter_url: str, four_shards: str
) -> None:
    storage = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=8)
    try:
        with pytest.raises(StorageConfigurationError, match="split into 4 shard"):
            storage.setup()
    finally:
        storage.close()
    assert_nothing_written(adapter_url, four_shards)


def test_setup_of_a_one_shard_store_with_jobs_as_sharded_creates_no_shard_store(
    adapter_url: str,
) -> None:
    name = unique_prefix()
    one = storage_adapters.from_url(adapter_url, prefix=name)
    one.setup()
    with Client(storage=one) as client:
        client.schedule("tasks.add", countdown=60)
    storage = storage_adapters.from_url(adapter_url, prefix=name, shards=8)
    try:
        with pytest.raises(StorageConfigurationError, match="already holds jobs kept in one shard"):
            storage.setup()
        assert [s for s in range(1, 8) if exists(adapter_url, shard_prefix(name, s))] == []
        assert one.count_by_state()["scheduled"] == 1
    finally:
        storage.close()
        drop_shards(adapter_url, name)
        one.drop()
        one.close()


def test_a_client_of_the_recorded_count_writes(adapter_url: str, four_shards: str) -> None:
    storage = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=4)
    with Client(storage=storage) as client:
        client.schedule("tasks.add", countdown=60)
        assert client.counts()["scheduled"] == 1
    storage.close()


def test_a_recurring_job_of_another_shard_count_is_refused(
    adapter_url: str, four_shards: str
) -> None:
    storage = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=8)
    with (
        Client(storage=storage) as client,
        pytest.raises(StorageConfigurationError, match="split into 4 shard"),
    ):
        client.recurring.save("r1", "tasks.add", every=60)
    storage.close()
    store = storage_adapters.from_url(adapter_url, prefix=four_shards, shards=4)
    try:
        assert store.count_recurring() == 0
    finally:
        store.close()
    assert_nothing_written(adapter_url, four_shards)
