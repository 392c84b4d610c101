"""A write path opened with another shard count than the store records is refused before it
writes anything (issue 19, section 3): its jobs would sit where no process of the store's count
ever looks, so they would never run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

import storage_adapters
from parallel_scheduler import Client
from storage_adapters import StorageConfigurationError
from storage_adapters.sharding import shard_prefix
from tests.conftest import storage_url, unique_prefix

KINDS = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return storage_url(str(request.param), tmp_path)


@pytest.fixture
def prefix(url: str) -> Iterator[str]:
    """A new prefix set up with 4 shards; dropped afterwards with any shard a test created."""
    name = unique_prefix()
    store = storage_adapters.from_url(url, prefix=name, shards=4)
    store.setup()
    store.close()
    yield name
    for shard in range(8):
        leftover = storage_adapters.from_url(url, prefix=shard_prefix(name, shard))
        leftover.drop()
        leftover.close()


def exists(url: str, prefix: str) -> bool:
    """Whether anything of the store under ``prefix`` exists (tables or keys), read only."""
    if url.startswith("redis"):
        client = redis.Redis.from_url(url)
        try:
            return any(True for _ in client.scan_iter(match=f"{{{prefix}}}:*", count=1000))
        finally:
            client.close()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
        return any(name.startswith(f"{prefix}_") for name in names)
    finally:
        engine.dispose()


def assert_nothing_written(url: str, prefix: str) -> None:
    store = storage_adapters.from_url(url, prefix=prefix, shards=4)
    try:
        assert not any(store.count_by_state().values())
    finally:
        store.close()
    for shard in range(4, 8):
        assert not exists(url, shard_prefix(prefix, shard)), shard


@pytest.mark.parametrize("shards", [8, 1])
def test_a_client_of_another_shard_count_is_refused_before_writing(
    url: str, prefix: str, shards: int
) -> None:
    storage = storage_adapters.from_url(url, prefix=prefix, shards=shards)
    with (
        Client(storage=storage) as client,
        pytest.raises(StorageConfigurationError, match="split into 4 shard"),
    ):
        client.schedule("tasks.add", countdown=60)
    storage.close()
    assert_nothing_written(url, prefix)


@pytest.mark.parametrize("write", ["cancel", "reschedule"])
def test_a_client_of_another_shard_count_cannot_cancel_or_reschedule(
    url: str, prefix: str, write: str
) -> None:
    right = storage_adapters.from_url(url, prefix=prefix, shards=4)
    with Client(storage=right) as client:
        job_id = client.schedule("tasks.add", countdown=60).job_id
    wrong = storage_adapters.from_url(url, prefix=prefix, shards=8)
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


def test_a_sharded_client_on_a_store_without_a_recorded_count_is_refused(url: str) -> None:
    name = unique_prefix()
    one = storage_adapters.from_url(url, prefix=name)
    one.setup()
    storage = storage_adapters.from_url(url, prefix=name, shards=8)
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


def test_setup_with_another_shard_count_creates_no_shard_store(url: str, prefix: str) -> None:
    storage = storage_adapters.from_url(url, prefix=prefix, shards=8)
    try:
        with pytest.raises(StorageConfigurationError, match="split into 4 shard"):
            storage.setup()
    finally:
        storage.close()
    assert_nothing_written(url, prefix)


def test_setup_of_a_one_shard_store_with_jobs_as_sharded_creates_no_shard_store(url: str) -> None:
    name = unique_prefix()
    one = storage_adapters.from_url(url, prefix=name)
    one.setup()
    with Client(storage=one) as client:
        client.schedule("tasks.add", countdown=60)
    storage = storage_adapters.from_url(url, prefix=name, shards=8)
    try:
        with pytest.raises(StorageConfigurationError, match="already holds jobs kept in one shard"):
            storage.setup()
        assert [s for s in range(1, 8) if exists(url, shard_prefix(name, s))] == []
        assert one.count_by_state()["scheduled"] == 1
    finally:
        storage.close()
        for shard in range(1, 8):
            leftover = storage_adapters.from_url(url, prefix=shard_prefix(name, shard))
            leftover.drop()
            leftover.close()
        one.drop()
        one.close()


def test_a_client_of_the_recorded_count_writes(url: str, prefix: str) -> None:
    storage = storage_adapters.from_url(url, prefix=prefix, shards=4)
    with Client(storage=storage) as client:
        client.schedule("tasks.add", countdown=60)
        assert client.counts()["scheduled"] == 1
    storage.close()


def test_a_recurring_job_of_another_shard_count_is_refused(url: str, prefix: str) -> None:
    storage = storage_adapters.from_url(url, prefix=prefix, shards=8)
    with (
        Client(storage=storage) as client,
        pytest.raises(StorageConfigurationError, match="split into 4 shard"),
    ):
        client.recurring.save("r1", "tasks.add", every=60)
    storage.close()
    store = storage_adapters.from_url(url, prefix=prefix, shards=4)
    try:
        assert store.count_recurring() == 0
    finally:
        store.close()
    assert_nothing_written(url, prefix)
