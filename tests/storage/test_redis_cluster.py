"""Redis Cluster facts the shared contract cannot see: slots, the shared client of siblings, the
one-script release being off, URL errors, and what survives a master's death.

Runs on ``PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL`` or on the session's throwaway cluster
(tests/conftest.py). The failover tests start a cluster of their own (``devtools.redis_cluster``)
and kill -9 one of its masters, a process they started, never one of a cluster they were given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from redis.cluster import ClusterNode, RedisCluster

from devtools.redis_cluster import free_ports
from devtools.waiting import wait_until
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.delayed.envelopes import script_release_for, stores_envelopes
from storage_adapters import (
    InvalidStorageURLError,
    JobState,
    NewJob,
    NewRecurring,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
    from_url,
    list_jobs,
)
from storage_adapters.redis.storage import RedisStorage
from tests.celery_apps import worker_app
from tests.conftest import (
    REDIS_URL,
    redis_cluster_url,
    require_server,
    unique_prefix,
)

pytestmark = pytest.mark.redis_cluster
T = TypeVar("T")
LOCK = "delayed-scheduler"
FAILOVER_SECONDS = 60.0


def cluster_client(url: str) -> RedisCluster:
    first = url.split("://", 1)[1].split(",")[0].split("@")[-1]
    host, _, port = first.rpartition(":")
    return RedisCluster(startup_nodes=[ClusterNode(host, int(port))], decode_responses=True)


@pytest.fixture
def url() -> str:
    require_server("redis-cluster")
    return redis_cluster_url()


@pytest.fixture
def raw(url: str) -> Iterator[RedisCluster]:
    client = cluster_client(url)
    yield client
    client.close()


@pytest.fixture
def make(url: str, raw: RedisCluster) -> Iterator[Callable[..., RedisStorage]]:
    """Set-up cluster storages; their keys are removed at the end."""
    made: list[RedisStorage] = []

    def make_one(prefix: str | None = None, query: str = "") -> RedisStorage:
        store = RedisStorage(url + query, prefix=prefix or unique_prefix())
        store.setup()
        made.append(store)
        return store

    yield make_one
    for store in made:
        keys = keys_of(raw, store._prefix)
        for key in keys:
            raw.unlink(key)
        store.close()


def keys_of(raw: RedisCluster, prefix: str) -> list[str]:
    """The prefix's keys, found on every master (not only where the adapter expects them)."""
    return sorted(
        raw.scan_iter(match="\\{" + prefix + "\\}:*", target_nodes=RedisCluster.PRIMARIES)
    )


def slots_of(raw: RedisCluster, keys: list[str]) -> set[int]:
    """The slots the server computes for ``keys`` (CLUSTER KEYSLOT)."""
    return {int(raw.cluster_keyslot(key)) for key in keys}


def job(job_id: str, due_at: float) -> NewJob:
    return NewJob(id=job_id, task="tasks.add", payload="[[1, 2], {}, {}]", due_at=due_at)


def test_two_prefixes_live_in_two_slots(
    make: Callable[..., RedisStorage], raw: RedisCluster
) -> None:
    a, b = make("ps_a"), make("ps_b")
    for store in (a, b):
        store.add_jobs([job("j1", store.now() - 1)])
    slots_a, slots_b = slots_of(raw, keys_of(raw, "ps_a")), slots_of(raw, keys_of(raw, "ps_b"))
    assert len(slots_a) == 1 and len(slots_b) == 1
    assert slots_a != slots_b
    assert slots_a == {int(raw.cluster_keyslot("{ps_a}"))}


def test_everything_a_prefix_writes_is_in_its_one_slot(
    make: Callable[..., RedisStorage], raw: RedisCluster
) -> None:
    store = make()
    now = store.now()
    store.add_jobs([job(f"j{i}", now - 10 + i) for i in range(5)])
    lock = store.acquire_lock(LOCK, "owner", 30)
    assert lock is not None
    claims = store.claim_due(3, lock, 30)
    store.mark_enqueued(claims[:1])
    store.expire(claims[1:2], "too late")
    store.unclaim(claims[2:])
    store.cancel("j4")
    store.save_recurring(
        NewRecurring("r1", "tasks.add", "[[], {}, {}]", "* * * * *", True, now - 1), "create"
    )
    assert store.store_shard_count(4) == 4
    keys = keys_of(raw, store._prefix)
    assert len(keys) > 10  # jobs, indexes, lock, fence, recurring, version, shards
    assert slots_of(raw, keys) == {int(raw.cluster_keyslot("{" + store._prefix + "}"))}


def test_a_cluster_storage_never_releases_by_one_script(
    make: Callable[..., RedisStorage], raw: RedisCluster
) -> None:
    """Even with a broker on the very node that owns the prefix's slot, the release is claim
    and send (the chunked fast publish path), never the one script."""
    store = make()
    owner = raw.get_node_from_key("{" + store._prefix + "}:version")
    publisher = RedisPublisher(
        worker_app("cluster-release", f"redis://{owner.host}:{owner.port}/0")
    )
    try:
        assert store.clustered
        assert publisher.list_server()[0] != store.server_identity()
        assert script_release_for(store, publisher) is None
        assert not stores_envelopes(store)
        lock = store.acquire_lock(LOCK, "owner", 30)
        assert lock is not None
        with pytest.raises(StorageError, match="not available on a Redis Cluster"):
            store.release_to_lists(10, lock, 30, 0)
    finally:
        publisher._redis.close()


def test_now_is_the_clock_of_the_master_of_the_prefix(
    make: Callable[..., RedisStorage], raw: RedisCluster
) -> None:
    store = make()
    owner = raw.get_node_from_key("{" + store._prefix + "}:version")
    before = raw.time(target_nodes=owner)
    now = store.now()
    after = raw.time(target_nodes=owner)
    assert before[0] + before[1] / 1e6 <= now <= after[0] + after[1] / 1e6


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis), "redis-cluster"])
def test_a_sibling_shares_the_client_and_only_the_original_closes_it(kind: str) -> None:
    require_server(kind)
    url = redis_cluster_url() if kind == "redis-cluster" else REDIS_URL
    original = RedisStorage(url, prefix=unique_prefix())
    sibling = original.sibling(unique_prefix())
    try:
        original.setup()
        sibling.setup()
        assert sibling._link is original._link
        sibling.add_jobs([job("s1", sibling.now())])
        assert original.get_job("s1") is None  # another prefix: another set of jobs
        assert sibling.get_job("s1") is not None
        sibling.close()
        with pytest.raises(StorageError, match="closed"):
            sibling.get_job("s1")
        assert original.count_by_state()[JobState.SCHEDULED] == 0  # still works
        again = original.sibling(sibling._prefix)
        assert again.get_job("s1") is not None
        original.close()
        with pytest.raises(StorageError, match="closed"):
            again.get_job("s1")
        with pytest.raises(StorageError, match="closed"):
            original.sibling("other")
    finally:
        cleaner = RedisStorage(url, prefix=sibling._prefix)
        cleaner.drop()
        cleaner.close()
        cleaner = RedisStorage(url, prefix=original._prefix)
        cleaner.drop()
        cleaner.close()


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis), "redis-cluster"])
def test_the_shard_count_is_stored_under_the_prefix(kind: str) -> None:
    require_server(kind)
    url = redis_cluster_url() if kind == "redis-cluster" else REDIS_URL
    store = RedisStorage(url, prefix=unique_prefix())
    try:
        assert store.stored_shard_count() is None
        assert store.store_shard_count(8) == 8
        assert store.store_shard_count(4) == 8  # the first recorded count stays
        assert store.stored_shard_count() == 8
        assert store.sibling(unique_prefix()).stored_shard_count() is None
        with pytest.raises(StorageError, match="shards"):
            store.store_shard_count(0)
    finally:
        store.drop()
        store.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://", "no host"),
        ("redis+cluster://:s3cret@", "no host"),
        ("redis+cluster://127.0.0.1:7000,127.0.0.1:99999", "bad port '99999'"),
        ("redis+cluster://:s3cret@127.0.0.1:x", "bad port 'x'"),
        ("redis+cluster://127.0.0.1:7000/1", "only database 0"),
        ("redis+cluster://127.0.0.1:7000?db=0", "unknown option 'db'"),
        ("redis+cluster://127.0.0.1:7000?wait_replicas=many", "wait_replicas must be"),
        ("redis+cluster://127.0.0.1:7000?wait_timeout_ms=0", "wait_timeout_ms must be"),
        ("redis://127.0.0.1:6379/0?wait_replicas=-1", "wait_replicas must be"),
    ],
)
def test_a_bad_cluster_url_says_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(InvalidStorageURLError, match="invalid Redis URL") as caught:
        from_url(url)
    assert problem in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_a_single_server_named_as_a_cluster_is_a_configuration_error() -> None:
    require_server("redis")
    host_port = REDIS_URL.split("://", 1)[1].split("/")[0].split("@")[-1]
    store = from_url(f"redis+cluster://{host_port}")
    with pytest.raises(StorageConfigurationError, match="not a Redis Cluster node"):
        store.setup()
    store.close()


def test_an_unreachable_cluster_is_unavailable_not_broken() -> None:
    """A storage is made while its cluster is down (nothing connects until used); using it then
    fails as transient, so the scheduler retries."""
    port = free_ports(1)[0]
    store = from_url(f"redis+cluster://:pw@127.0.0.1:{port}", connect_timeout=0.5)
    with pytest.raises(StorageUnavailableError) as caught:
        store.setup()
    assert "pw@" not in str(caught.value)
    store.close()


def test_too_few_replicas_fail_a_write_as_unavailable(make: Callable[..., RedisStorage]) -> None:
    """Each master has one replica: waiting for two times out, and the write is reported as
    not safely stored (it is on the master)."""
    store = make(query="?wait_replicas=2&wait_timeout_ms=500")
    with pytest.raises(StorageUnavailableError, match="only 1 of 2 replicas"):
        store.add_jobs([job("w1", store.now())])
    assert store.get_job("w1") is not None


# -- failover ------------------------------------------------------------------------------


def eventually(call: Callable[[], T], seen: list[Exception]) -> T:
    """``call()`` once it succeeds, retrying on ``StorageUnavailableError`` (recorded in ``seen``)
    until the failover deadline, as the scheduler's own retry would."""

    def attempt() -> list[T] | None:
        try:
            return [call()]
        except StorageUnavailableError as exc:
            seen.append(exc)
            return None

    return wait_until(attempt, FAILOVER_SECONDS, interval=0.1)[0]


@pytest.mark.slow
def test_the_storage_keeps_working_after_its_master_dies(own_redis_cluster: Any) -> None:
    store = RedisStorage(own_redis_cluster.url, prefix="ps_failover")
    store.setup()
    try:
        store.add_jobs([job("before", store.now() - 1)])
        old_port, _ = own_redis_cluster.kill_master_of("{ps_failover}")
        seen: list[Exception] = []
        eventually(lambda: store.add_jobs([job("after", time.time())]), seen)
        assert seen, "the dead master went unnoticed"
        new_port = own_redis_cluster.wait_for_master_change("{ps_failover}", old_port)
        assert new_port != old_port
        lock = eventually(lambda: store.acquire_lock(LOCK, "owner", 30), seen)
        assert lock is not None
        claimed = eventually(lambda: store.claim_due(10, lock, 30), seen)
        assert eventually(lambda: store.mark_enqueued(claimed), seen) == [c.id for c in claimed]
        assert eventually(lambda: store.get_job("after"), seen) is not None
    finally:
        store.close()


@pytest.mark.slow
def test_with_wait_replicas_acknowledged_jobs_survive_the_masters_death(
    own_redis_cluster: Any,
) -> None:
    """Replication is asynchronous: only ``wait_replicas`` makes an acknowledged accept be on the
    replica that is promoted when the master dies."""
    store = RedisStorage(
        own_redis_cluster.url + "?wait_replicas=1&wait_timeout_ms=5000", prefix="ps_wait"
    )
    store.setup()
    try:
        due = store.now() + 3600
        for start in range(0, 1000, 100):
            accepted = store.add_jobs([job(f"j{i}", due + i) for i in range(start, start + 100)])
            assert accepted == [True] * 100
        old_port, _ = own_redis_cluster.kill_master_of("{ps_wait}")
        own_redis_cluster.wait_for_master_change("{ps_wait}", old_port)
        seen: list[Exception] = []
        counts = eventually(store.count_by_state, seen)
        assert counts[JobState.SCHEDULED] == 1000
        jobs = eventually(lambda: list_jobs(store, JobState.SCHEDULED, 1000), seen)
        assert [j.id for j in jobs] == [f"j{i}" for i in range(1000)]
    finally:
        store.close()
