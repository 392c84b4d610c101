"""Fixtures of the fault suite: servers of its own, and scheduler processes ended by pid.

The suite never uses the machine's shared PostgreSQL, Redis or RabbitMQ: it starts throwaway
servers from the installed binaries on free ports (``servers.py``), once per session, because its
tests stop, kill, freeze and restart them. A test may leave a server stopped or frozen; the
function-scoped fixtures bring it back before the next test. Missing binaries skip the suite on a
developer's machine and fail it under ``CI=true``, with what to install.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import storage_adapters
from storage_adapters import Storage
from tests.conftest import IN_CI
from tests.faults.harness import ChildProcess, SchedulerProcess
from tests.faults.servers import (
    MissingBinaryError,
    PostgresServer,
    RedisServer,
    Server,
    new_workdir,
)

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
    made: list[Storage] = []

    def make(url: str, prefix: str) -> Storage:
        store = storage_adapters.from_url(url, prefix=prefix, pool_size=4)
        store.setup()
        made.append(store)
        return store

    yield make
    for store in made:
        # A test that left its server down: the throwaway server goes away anyway.
        with contextlib.suppress(storage_adapters.StorageError):
            store.drop()
        store.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., SchedulerProcess]]:
    """Start scheduler processes; every one still alive at the end is killed by its pid."""
    started: list[SchedulerProcess] = []

    def start(
        name: str, storage_url: str, prefixes: list[str], **settings: Any
    ) -> SchedulerProcess:
        process = SchedulerProcess(tmp_path, name, storage_url, prefixes, **settings)
        started.append(process)
        return process

    yield start
    for process in started:
        process.end()


@pytest.fixture
def spawn_command(tmp_path: Path) -> Iterator[Callable[..., ChildProcess]]:
    """Start any command (a celery worker, the CLI); ended by its pid at the end (SIGTERM first,
    so a worker can finish what it holds)."""
    started: list[ChildProcess] = []

    def start(name: str, command: list[str], env: dict[str, str] | None = None) -> ChildProcess:
        process = ChildProcess(tmp_path, name, command, env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.end(grace=20)
