"""``/healthz`` beside ``/metrics``: 200 while the scheduler's loops make progress, 503 once one
is stuck or dead, for a Kubernetes liveness probe.

The stuck pass is a real one: the broker hand-off hangs (the dispatcher blocks, as a publish to
an unresponsive broker does), so the pass's pool never returns and its loop stops stamping its
progress; and a storage call that never ends (PostgreSQL behind a loopback relay that stops
relaying). The dead loop is a loop thread that has ended while the service runs.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import Client, Settings
from parallel_scheduler.dispatchers import CallableDispatcher
from parallel_scheduler.process.loop_health import stall_after
from parallel_scheduler.process.service import SchedulerService
from storage_adapters import JobState, Storage
from tests.conftest import POSTGRESQL_URL, SLOW_MACHINE_FACTOR, require_server, unique_prefix
from tests.loopback import CountingListener

SETTINGS = {
    "metrics_port": 0,
    "poll_interval": 0.05,
    "lock_lease": 0.5,
    "heartbeat_interval": 0.2,
    "max_degree_of_parallelism": 2,
    "connect_timeout": 0.5,
}
#: A deadline for each condition: a stall is told after ``stall_after`` (2.55 s here).
WAIT = 30 * SLOW_MACHINE_FACTOR


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def answered(url: str, status: int) -> str | None:
    code, body = get(url)
    return body if code == status else None


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    store = storage_adapters.from_url(f"sqlite:///{tmp_path / 'healthz.db'}")
    store.setup()
    yield store
    store.close()


def test_healthz_says_when_a_pass_hangs_in_the_pool_and_when_a_loop_dies(
    storage: Storage,
) -> None:
    gate = threading.Event()

    def hand_over(*call: Any) -> None:  # a broker that does not answer until the gate opens
        gate.wait(WAIT * 4)

    service = SchedulerService.build(storage, CallableDispatcher(hand_over), Settings(**SETTINGS))  # type: ignore[arg-type]
    assert service.metrics is not None
    service.start()
    try:
        metrics_url = service.metrics.url
        assert metrics_url is not None
        healthz = metrics_url.removesuffix("/metrics") + "/healthz"
        # Given loops that turn: 200
        assert wait_until(lambda: answered(healthz, 200), WAIT) == "ok\n"
        # When a job falls due and its hand-off hangs, the pass stops making progress: 503
        Client(storage).schedule("t.hangs", job_id="hangs")
        body = wait_until(lambda: answered(healthz, 503), WAIT, interval=0.1)
        assert body.startswith("delayed-scheduler: a pass has made no progress for ")
        assert f"(stuck after {stall_after(service.settings):.0f} s)" in body
        # The metrics are still served, with the process's own figures and no _created series
        code, metrics = get(metrics_url)
        assert code == 200
        assert 'parallel_scheduler_build_info{version="' in metrics
        assert "process_cpu_seconds_total " in metrics
        assert "_created" not in metrics
        # When the hand-off goes through, the loop turns again: 200
        gate.set()
        wait_until(lambda: answered(healthz, 200), WAIT, interval=0.1)
        released = Client(storage)
        wait_until(lambda: getattr(released.get("hangs"), "state", None) == JobState.ENQUEUED, WAIT)
        # When a loop thread ends while the service runs: 503, naming it
        service.recurring.stop()
        body = wait_until(lambda: answered(healthz, 503), WAIT, interval=0.1)
        assert body == "recurring-scheduler: its loop thread has ended\n"
    finally:
        gate.set()
        service.close()
    # A stopped service answers nothing at all: its endpoint is gone with it
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(healthz, timeout=5)


class StallingRelay(CountingListener):
    """A relay to PostgreSQL that stops relaying on ``stall()``: every call in flight then waits
    for an answer that never comes, as behind a hung network path."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.flowing = threading.Event()
        self.flowing.set()
        super().__init__("forward", upstream=upstream)

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def _pump(self, source: Any, sink: Any) -> None:  # type: ignore[override]
        import contextlib
        import socket

        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self.flowing.wait()
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.mark.postgresql
def test_healthz_says_when_a_storage_call_never_ends() -> None:
    require_server("postgresql")
    from urllib.parse import urlsplit

    server = urlsplit(POSTGRESQL_URL)
    relay = StallingRelay((server.hostname or "127.0.0.1", server.port or 5432))
    relayed = POSTGRESQL_URL.replace(server.netloc.rpartition("@")[2], f"127.0.0.1:{relay.port}")
    prefix = unique_prefix()
    direct = storage_adapters.from_url(POSTGRESQL_URL, prefix=prefix)
    direct.setup()
    storage = storage_adapters.from_url(relayed, prefix=prefix, pool_size=4)
    sent: list[str] = []
    dispatcher = CallableDispatcher(lambda task, args, kwargs, options, job_id: sent.append(job_id))
    service = SchedulerService.build(storage, dispatcher, Settings(**SETTINGS))  # type: ignore[arg-type]
    service.start()
    try:
        assert service.metrics is not None and service.metrics.url is not None
        healthz = service.metrics.url.removesuffix("/metrics") + "/healthz"
        wait_until(lambda: answered(healthz, 200), WAIT)
        Client(direct).schedule("t.first", job_id="first")
        wait_until(lambda: "first" in sent, WAIT)
        # When the path to storage hangs, the loops' storage calls never end: 503
        relay.stall()
        body = wait_until(lambda: answered(healthz, 503), WAIT, interval=0.1)
        assert "has made no progress for " in body
        # When it flows again, so do the loops
        relay.resume()
        wait_until(lambda: answered(healthz, 200), WAIT, interval=0.1)
        Client(direct).schedule("t.second", job_id="second")
        wait_until(lambda: "second" in sent, WAIT)
    finally:
        relay.resume()
        service.close()
        storage.close()
        relay.close()
        direct.drop()
        direct.close()
