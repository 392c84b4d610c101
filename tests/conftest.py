"""Shared fixtures: real servers only, one isolated prefix per test.

Server-backed tests skip when their server is unreachable on a developer's machine, and fail
under ``CI=true``, where a skipped storage test would hide a broken adapter. The addresses come
from ``PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL``, ``PARALLEL_SCHEDULER_TEST_REDIS_URL`` and, for the
RabbitMQ broker, ``PARALLEL_SCHEDULER_TEST_RABBITMQ_URL``. The Redis Cluster tests use
``PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL`` (``redis+cluster://host:port,...``); without it, the
first test that needs a cluster starts a throwaway one (``devtools.redis_cluster``) for the
session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import storage_adapters
from devtools import redis_cluster as cluster_launcher
from storage_adapters import Storage

POSTGRESQL_URL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("PARALLEL_SCHEDULER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
RABBITMQ_URL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"
)
REDIS_CLUSTER_ENV = "PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL"
T = TypeVar("T")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: The one factor by which the tests scale a wall-clock allowance, used only where time itself is
#: the property and cannot be counted (a timeout must fire after about N s): how much longer than
#: on an idle developer machine a call may take on a loaded two-core CI machine. An allowance of
#: N expected seconds is ``N * SLOW_MACHINE_FACTOR``; a test using it must still fail on the
#: regression it guards (check that the scaled allowance stays below the regression's time).
#: Everything else is counted (attempts, connections, announced waits), never timed.
#: ``PARALLEL_SCHEDULER_SLOW_MACHINE_FACTOR`` overrides it.
SLOW_MACHINE_FACTOR = float(os.environ.get("PARALLEL_SCHEDULER_SLOW_MACHINE_FACTOR", "2.5"))

_reachable: dict[str, str | None] = {}
_cluster: list[Any] = []  # the throwaway Redis Cluster this session started, if it did
_killable: list[Any] = []  # the session's cluster for tests that kill nodes (own_redis_cluster)


def throwaway_cluster() -> Any:
    """The Redis Cluster this session started, starting it now if needed; ``None`` when the
    environment names one (then no test may kill its nodes). Stopped at the session's end."""
    if os.environ.get(REDIS_CLUSTER_ENV):
        return None
    if not _cluster:
        _cluster.append(cluster_launcher.start())
    return _cluster[0]


def redis_cluster_url() -> str:
    """The test cluster's URL: the environment's, else the session's throwaway cluster's."""
    return os.environ.get(REDIS_CLUSTER_ENV) or str(throwaway_cluster().url)


def redis_client(url: str) -> Any:
    """A raw client for a test's Redis URL, for writing keys by hand: ``redis.Redis``, or
    ``redis.cluster.RedisCluster`` for a ``redis+cluster://`` URL (every key of a prefix is in
    one slot, so single-key and same-prefix commands work on either)."""
    import redis
    from redis.cluster import ClusterNode, RedisCluster

    if not url.startswith("redis+cluster://"):
        return redis.Redis.from_url(url)
    first = url.split("://", 1)[1].split(",")[0].split("@")[-1].split("/")[0].split("?")[0]
    host, _, port = first.rpartition(":")
    return RedisCluster(startup_nodes=[ClusterNode(host, int(port))])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _cluster:
        _cluster.pop().stop()
    while _killable:
        _killable.pop().stop()


def _problem_with(kind: str) -> str | None:
    """Why ``kind``'s server cannot be used, or ``None``; probed once per session."""
    if kind not in ("postgresql", "redis", "rabbitmq", "redis-cluster"):
        raise ValueError(f"unknown server kind {kind!r}")
    if kind not in _reachable:
        try:
            if kind == "redis-cluster":
                from redis.cluster import RedisCluster

                first = redis_cluster_url().split("://", 1)[1].split(",")[0].split("@")[-1]
                host, _, port = first.rpartition(":")
                RedisCluster(host=host, port=int(port), socket_connect_timeout=3).close()
            elif kind == "postgresql":
                import psycopg

                dsn = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
                psycopg.connect(dsn, connect_timeout=3).close()
            elif kind == "redis":
                import redis

                redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
            elif kind == "rabbitmq":
                from kombu import Connection

                with Connection(RABBITMQ_URL, connect_timeout=3) as connection:
                    connection.ensure_connection(max_retries=1)
            _reachable[kind] = None
        except Exception as exc:
            _reachable[kind] = f"{kind} server unreachable ({type(exc).__name__}: {exc})"
    return _reachable[kind]


def require_server(kind: str) -> None:
    problem = _problem_with(kind)
    if problem is None:
        return
    hint = "start it, or run `make test`, which starts throwaway servers"
    if IN_CI:
        pytest.fail(f"{problem}; CI=true forbids skipping storage tests: {hint}")
    pytest.skip(f"{problem}: {hint}")


def unique_prefix() -> str:
    return "t" + uuid.uuid4().hex[:12]


def set_up_storage(url: str) -> tuple[str, Storage]:
    """A set-up storage at ``url`` under a new prefix, and the prefix (for other processes to
    open the same jobs); the caller drops and closes it."""
    prefix = unique_prefix()
    store = storage_adapters.from_url(url, prefix=prefix)
    store.setup()
    return prefix, store


@pytest.fixture
def postgresql_storage() -> Iterator[Storage]:
    """A set-up PostgreSQL storage on a prefix of its own, dropped afterwards: for tests of what
    only PostgreSQL does (its transactional release, say)."""
    require_server("postgresql")
    _, store = set_up_storage(POSTGRESQL_URL)
    try:
        yield store
    finally:
        store.drop()
        store.close()


def made_by(make: Callable[..., T], end: Callable[[T], object]) -> Iterator[Callable[..., T]]:
    """The body of a factory fixture: yields ``make`` to the test, then ends everything it made
    (servers' clients, processes by pid, publishers), in the order made, when the test ends."""
    made: list[T] = []

    def tracked(*args: Any, **kwargs: Any) -> T:
        thing = make(*args, **kwargs)
        made.append(thing)
        return thing

    yield tracked
    for thing in made:
        end(thing)


@pytest.fixture
def own_redis_cluster() -> Iterator[Any]:
    """A throwaway Redis Cluster this session started (``devtools.redis_cluster``), never the one
    the environment names, for a test that kills one of its masters. The tests that kill share
    it (starting six nodes and creating the cluster costs ~2.5 s, bringing a killed node back
    ~0.5 s): after each, every node it killed is started again (it rejoins as a replica), every
    slot is served and every master has its replica online, and every key is deleted, so the next
    test finds a whole, empty cluster; one that cannot be made whole again is stopped, and the
    next test gets a new one. Stopped by its recorded pids at the session's end."""
    if not _killable:
        try:
            _killable.append(cluster_launcher.start())
        except cluster_launcher.MissingBinaryError as exc:
            if IN_CI:
                pytest.fail(str(exc))
            pytest.skip(str(exc))
    cluster = _killable[0]
    yield cluster
    try:
        for port, pid in list(zip(cluster.ports, cluster.pids, strict=True)):
            if pid in cluster.killed:
                cluster.restart(port)
        for port in cluster.ports:
            node = cluster._client(port)
            if node.info("replication").get("role") == "master":
                node.flushall()
        cluster.wait_whole()
    except Exception:  # not whole again: the next test starts a new one
        _killable.remove(cluster)
        cluster.stop()
        raise


#: Adapter kinds ending in this run on a store split into ``SHARDED_COUNT`` shards. Three is
#: enough for what the sharded layer adds (routing by id, merging pages and counts of more than
#: two shards, a lock over every shard; the contract tests' ids land on every shard): a shard
#: more only repeats each shard's setup, statements and teardown.
SHARDED = "-sharded"
SHARDED_COUNT = 3


def shards_for(kind: str) -> int:
    """How many shards an adapter kind's stores have (``sqlite-sharded``: ``SHARDED_COUNT``)."""
    return SHARDED_COUNT if kind.endswith(SHARDED) else 1


def storage_url(kind: str, tmp_path: Path) -> str:
    kind = kind.removesuffix(SHARDED)
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    require_server(kind)
    if kind == "redis-cluster":
        return redis_cluster_url()
    return POSTGRESQL_URL if kind == "postgresql" else REDIS_URL


#: Every test that takes ``adapter_kind`` runs on each of these.
ADAPTERS = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("redis", marks=pytest.mark.redis),
]
#: The storage contract suite (tests/storage/contract) runs on these too: a Redis Cluster, and
#: stores split into shards (sharded_storage.py over shard stores) on SQLite and on the cluster.
#: The sharded layer is the same code over every backend; what differs per backend (a shard
#: store on a shared engine or client: ``sibling``) is checked by test_sharding.py on each, and
#: the other suites run sharded where they test what differs (test_redis_cluster.py,
#: tests/scheduler/test_shards.py, tests/faults/test_scale_out.py). (PostgreSQL and plain Redis
#: sharded pass the whole suite too: add ``postgresql-sharded`` or ``redis-sharded`` here to run
#: them; left out of ``make test`` for time, 90 s.)
CONTRACT_ADAPTERS = [
    *ADAPTERS,
    pytest.param("redis-cluster", marks=pytest.mark.redis_cluster),
    "sqlite-sharded",
    pytest.param("redis-cluster-sharded", marks=pytest.mark.redis_cluster),
]


@pytest.fixture(params=ADAPTERS)
def adapter_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def adapter_url(adapter_kind: str, tmp_path: Path) -> str:
    """The URL of a store of ``adapter_kind`` (SQLite: a file under ``tmp_path``)."""
    return storage_url(adapter_kind, tmp_path)


@pytest.fixture
def four_shards(adapter_url: str) -> Iterator[str]:
    """A new prefix set up with 4 shards; dropped afterwards with any shard a test created."""
    from tests.shard_stores import drop_shards

    name = unique_prefix()
    store = storage_adapters.from_url(adapter_url, prefix=name, shards=4)
    store.setup()
    store.close()
    yield name
    drop_shards(adapter_url, name)


@pytest.fixture
def make_storage(adapter_kind: str, tmp_path: Path) -> Iterator[object]:
    """A factory of storages that share one prefix, as several scheduler processes would."""
    url = storage_url(adapter_kind, tmp_path)
    prefix = unique_prefix()
    made: list[Storage] = []

    def make(pool_size: int = 10) -> Storage:
        store = storage_adapters.from_url(
            url, prefix=prefix, pool_size=pool_size, shards=shards_for(adapter_kind)
        )
        store.setup()
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    if made:  # a fresh adapter, since the test may have closed the ones it made
        cleaner = storage_adapters.from_url(url, prefix=prefix, shards=shards_for(adapter_kind))
        cleaner.drop()
        cleaner.close()


@pytest.fixture
def storage(make_storage: object) -> Storage:
    """A fresh, set-up storage under a prefix no other test uses."""
    return make_storage()  # type: ignore[operator,no-any-return]
