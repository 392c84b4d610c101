"""Fixtures of the fault suite: servers of its own, and scheduler processes ended by pid.

The suite never uses the machine's shared PostgreSQL, Redis or RabbitMQ: it starts throwaway
servers from the installed binaries on free ports (the launcher the benchmarks and `make test`
share, ``devtools.servers``), once per session, because its
tests stop, kill, freeze and restart them. A test may leave a server stopped or frozen; the
function-scoped fixtures bring it back before the next test. Missing binaries skip the suite on a
developer's machine and fail it under ``CI=true``, with what to install.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pytest

import storage_adapters
from devtools.processes import ChildProcess
from devtools.scheduler_process import lock_holder_process, read_dispatches
from devtools.servers import (
    MissingBinaryError,
    PostgresServer,
    RedisServer,
    Server,
    new_workdir,
)
from devtools.waiting import wait_until
from storage_adapters import JobState, Storage
from tests.conftest import IN_CI, made_by, unique_prefix
from tests.faults.harness import SchedulerProcess, add_jobs

S = TypeVar("S", bound=Server)


def _unavailable(problem: str) -> None:
    if IN_CI:
        pytest.fail(f"{problem}; CI=true forbids skipping the fault suite")
    pytest.skip(problem)


def _session_server(make: Callable[[], S]) -> Iterator[S]:
    try:
        server = make()
    except MissingBinaryError as exc:
        _unavailable(str(exc))
        raise  # unreachable: skip and fail both raise
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    yield from _session_server(lambda: PostgresServer(new_workdir("postgresql")))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    yield from _session_server(lambda: RedisServer(new_workdir("redis")))


def _healthy(server: S) -> S:
    """Whatever the previous test did to it, the server is running and answering."""
    server.resume()
    if not server.running or not server.answers():
        if server.running:
            server.kill()
        server.start()
    return server


@pytest.fixture
def postgres(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    yield _healthy(postgres_server)
    _healthy(postgres_server)


@pytest.fixture
def redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    yield _healthy(redis_server)
    _healthy(redis_server)


@pytest.fixture
def broker_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis broker of the test's own, separate from the storage server, for outages."""
    try:
        server = RedisServer(new_workdir("broker"), label="broker")
    except MissingBinaryError as exc:
        _unavailable(str(exc))
        raise
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def server_for(postgres: PostgresServer, redis: RedisServer) -> Callable[[str], Server]:
    return lambda kind: postgres if kind == "postgresql" else redis


@pytest.fixture
def open_storage() -> Iterator[Callable[[str, str], Storage]]:
    """``open_storage(url, prefix)``: a set-up storage, dropped at the end (if the server is up).
    Tests take their prefixes from ``tests.conftest.unique_prefix``."""

    def make(url: str, prefix: str) -> Storage:
        store = storage_adapters.from_url(url, prefix=prefix, pool_size=4)
        store.setup()
        return store

    def end(store: Storage) -> None:
        # A test that left its server down: the throwaway server goes away anyway.
        with contextlib.suppress(storage_adapters.StorageError):
            store.drop()
        store.close()

    yield from made_by(make, end)


class DueJobs(NamedTuple):
    """A storage under a prefix of its own, holding jobs that are already due."""

    storage: Storage
    prefix: str
    ids: list[str]


@pytest.fixture
def due_jobs(open_storage: Callable[[str, str], Storage]) -> Callable[..., DueJobs]:
    """``due_jobs(url, label, count, payload="{}")``: ``count`` jobs (ids ``<label>-<n>``) due a
    second ago, in a fresh storage under a new prefix: the start of most fault tests."""

    def make(url: str, label: str, count: int, payload: str = "{}") -> DueJobs:
        prefix = unique_prefix()
        storage = open_storage(url, prefix)
        ids = [f"{label}-{i}" for i in range(count)]
        add_jobs(storage, ids, storage.now() - 1, payload)
        return DueJobs(storage, prefix, ids)

    return make


class Pair(NamedTuple):
    """Two scheduler processes over the same prefix, the one that holds the lock unknown."""

    first: SchedulerProcess
    second: SchedulerProcess

    @property
    def processes(self) -> list[SchedulerProcess]:
        return [self.first, self.second]

    @property
    def records(self) -> list[Path]:
        return [self.first.record, self.second.record]

    def other(self, process: SchedulerProcess) -> SchedulerProcess:
        return self.second if process is self.first else self.first

    def holder_after(self, storage: Storage, dispatched: int) -> SchedulerProcess:
        """The lock holder, once the pair has dispatched ``dispatched`` jobs: the moment a fault
        lands in the middle of a release."""
        wait_until(lambda: len(read_dispatches(self.records)) >= dispatched, timeout=60)

        def holder_mid_release() -> SchedulerProcess | None:
            # Both read together: a holder seen once the release is over would strike nothing.
            holder = lock_holder_process(storage, self.processes)
            if holder is None or storage.count_by_state()[JobState.SCHEDULED] == 0:
                return None
            return self.first if holder is self.first else self.second

        return wait_until(holder_mid_release, timeout=10)


@pytest.fixture
def spawn_pair(spawn: Callable[..., SchedulerProcess]) -> Callable[..., Pair]:
    """``spawn_pair(url, prefix, settings)``: processes "first" and "second" with the same
    settings, both started before either is waited for, both ready."""

    def start(url: str, prefix: str, settings: dict[str, Any]) -> Pair:
        first = spawn("first", url, [prefix], **settings)
        second = spawn("second", url, [prefix], **settings)
        first.wait_ready()
        second.wait_ready()
        return Pair(first, second)

    return start


class HolderFault(NamedTuple):
    """A release path under a lock-holder fault: PostgreSQL with ``per_job`` or Redis with
    ``batch``, the server, and the fixtures that seed jobs and start two schedulers."""

    kind: str
    release_mode: str
    server: Server
    due_jobs: Callable[..., DueJobs]
    spawn_pair: Callable[..., Pair]


@pytest.fixture(
    params=[("postgresql", "per_job"), ("redis", "batch")],
    ids=["postgresql-per_job", "redis-batch"],
)
def holder_fault(
    request: pytest.FixtureRequest,
    server_for: Callable[[str], Server],
    due_jobs: Callable[..., DueJobs],
    spawn_pair: Callable[..., Pair],
) -> HolderFault:
    kind, release_mode = request.param
    return HolderFault(kind, release_mode, server_for(kind), due_jobs, spawn_pair)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., SchedulerProcess]]:
    """Start scheduler processes; every one still alive at the end is killed by its pid."""
    yield from made_by(functools.partial(SchedulerProcess, tmp_path), SchedulerProcess.end)


@pytest.fixture
def spawn_command(tmp_path: Path) -> Iterator[Callable[..., ChildProcess]]:
    """Start any command (a celery worker, the CLI); ended by its pid at the end (SIGTERM first,
    so a worker can finish what it holds)."""
    yield from made_by(functools.partial(ChildProcess, tmp_path), lambda p: p.end(grace=20))
