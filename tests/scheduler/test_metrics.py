"""Prometheus metrics: a real ``parallel-scheduler run`` scraped over HTTP, the storage figures
on every adapter, and metrics off unless asked for."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
import redis

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import Client, ConfigurationError, Settings
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.dispatchers import CallableDispatcher
from parallel_scheduler.engine.recorder import NULL_RECORDER
from parallel_scheduler.process.metrics import MetricsServer, StorageCollector
from parallel_scheduler.process.service import SchedulerService
from storage_adapters import NewJob, Storage
from tests.conftest import REDIS_URL, require_server
from tests.metrics_scrape import Samples, scrape

DUE = 4  # jobs already overdue when the scheduler starts
FAR = 3  # jobs due in an hour
OVERDUE = 30.0  # seconds the due jobs are late by when stored
HOUR = 3600.0


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[("parallel_scheduler_" + name, tuple(sorted(labels.items())))]


def _read_lines(stream: object, lines: list[str]) -> None:
    lines.extend(stream)  # type: ignore[call-overload]  # line by line, as the process writes


@pytest.mark.redis
def test_a_running_scheduler_serves_what_it_did(tmp_path: Path) -> None:
    require_server("redis")
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    queue = f"ps-metrics-{uuid.uuid4().hex[:8]}"
    client = Client(storage_url=url)
    client.setup()
    storage = storage_adapters.from_url(url)
    now = storage.now()
    for i in range(DUE):
        client.schedule("tasks.m", [i], eta=now - OVERDUE, job_id=f"due-{i}", queue=queue)
    for i in range(FAR):
        client.schedule("tasks.m", [i], countdown=HOUR, job_id=f"far-{i}", queue=queue)
    # An hourly job whose next run is three hours back: with no grace, the ticks of the last
    # four hours (three back to this hour's) are missed, and run_once fires the latest of them
    client.recurring.save(
        "hourly", "tasks.m", "0 * * * *", misfire_policy="run_once", misfire_grace=0, queue=queue
    )
    assert storage.set_recurring_enabled("hourly", True, (now // HOUR) * HOUR - 3 * HOUR)
    # Another process holds the delayed lock, so the due jobs wait while we look at them
    blocker = storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "test-blocker", 120)
    assert blocker is not None
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-m", "parallel_scheduler", "--log-level", "INFO",
         "--storage-url", url, "run", "--broker-url", REDIS_URL,
         "--poll-interval", "0.2", "--lock-lease", "2", "--metrics-port", "0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=_read_lines, args=(process.stderr, lines), daemon=True).start()
    broker = redis.Redis.from_url(REDIS_URL)
    try:
        found = wait_until(
            lambda: next(
                (m for line in lines if (m := re.search(r"http://\S+/metrics", line))), None
            ),
            timeout=30,
        )
        metrics_url = found.group(0)
        assert metrics_url.startswith("http://127.0.0.1:")  # loopback unless told otherwise

        # While blocked: the recurring scheduler fired, the delayed one waits on the lock
        def fired() -> Samples | None:
            samples = scrape(metrics_url)
            return samples if value(samples, "due_jobs") == DUE + 1 else None

        blocked = wait_until(fired, timeout=30, interval=0.5)
        assert value(blocked, "firings_total") == 1
        assert value(blocked, "misfires_total", policy="run_once") == 4
        assert value(blocked, "misfires_total", policy="skip") == 0
        assert value(blocked, "lock_held", lock="recurring-scheduler", shard="0") == 1
        assert value(blocked, "lock_held", lock="delayed-scheduler", shard="0") == 0
        assert value(blocked, "released_total", path="fast_publish") == 0
        assert value(blocked, "lag_seconds") >= OVERDUE  # the firing is over an hour late
        assert value(blocked, "jobs", state="scheduled") == DUE + 1 + FAR
        assert value(blocked, "storage_up") == 1

        # When the lock comes free, the scheduler takes it and releases every due job
        assert storage.release_lock(blocker)

        def released() -> Samples | None:
            samples = scrape(metrics_url)
            return samples if value(samples, "due_jobs") == 0 else None

        after = wait_until(released, timeout=30, interval=0.5)
        done = time.time()
        assert broker.llen(queue) == DUE + 1
        # by the default path: a batch, each chunk in one push to the Redis broker (the fast path)
        assert value(after, "released_total", path="fast_publish") == DUE + 1
        for path in ("per_job", "batch", "one_script"):
            assert value(after, "released_total", path=path) == 0
        assert value(after, "release_errors_total", reason="dispatch_failed") == 0
        assert value(after, "expired_total") == 0
        assert value(after, "jobs", state="scheduled") == FAR
        assert value(after, "jobs", state="enqueued") == DUE + 1
        assert value(after, "lag_seconds") == 0
        assert value(after, "lock_held", lock="delayed-scheduler", shard="0") == 1
        assert value(after, "pass_seconds_count", kind="delayed") > 0
        assert value(after, "pass_seconds_count", kind="recurring") > 0
        # Lateness: one observation per job sent, each at least as late as it was overdue
        assert value(after, "release_lateness_seconds_count", cause="release") == DUE + 1
        assert value(after, "release_lateness_seconds_sum", cause="release") >= (DUE + 1) * OVERDUE
        assert value(after, "release_lateness_seconds_count", cause="rate_limit") == 0
        assert started <= value(after, "heartbeat_timestamp_seconds") <= done
    finally:
        process.terminate()
        process.wait(timeout=30)
        broker.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()
        storage.close()


def _store(storage: Storage, due_ats: list[float]) -> None:
    storage.add_jobs(
        [NewJob(id=f"j{uuid.uuid4().hex}", task="t", payload="{}", due_at=d) for d in due_ats]
    )


def _collected(collector: StorageCollector) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in collector.collect()
        for sample in family.samples
    }


def test_storage_figures_are_read_at_scrape_time_and_cached(storage: Storage) -> None:
    now = storage.now()
    _store(storage, [now - 100, now - 40, now + HOUR])
    collector = StorageCollector(storage, cache_seconds=HOUR)
    first = _collected(collector)
    assert value(first, "jobs", state="scheduled") == 3
    assert value(first, "jobs", state="enqueued") == 0
    assert value(first, "due_jobs") == 2
    assert 100 <= value(first, "lag_seconds") < 100 + 60
    # Within the cache time a scrape costs storage nothing: the figures are those of the last read
    _store(storage, [now - 1])
    assert _collected(collector) == first
    # A fresh read sees the new job
    assert value(_collected(StorageCollector(storage, cache_seconds=0)), "due_jobs") == 3


def test_nothing_due_is_no_lag(storage: Storage) -> None:
    _store(storage, [storage.now() + HOUR])
    samples = _collected(StorageCollector(storage))
    assert value(samples, "due_jobs") == 0
    assert value(samples, "lag_seconds") == 0


def _listening_ports() -> set[int]:
    return {
        c.laddr.port
        for c in psutil.Process().net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }


def _service(tmp_path: Path, **settings: object) -> tuple[SchedulerService, Storage]:
    storage = storage_adapters.from_url(f"sqlite:///{tmp_path / 'svc.db'}")
    storage.setup()
    dispatcher = CallableDispatcher(lambda *call: None)
    return SchedulerService.build(storage, dispatcher, Settings(**settings)), storage  # type: ignore[arg-type]


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    before = _listening_ports()
    service, storage = _service(tmp_path, poll_interval=0.05)
    service.start()
    try:
        assert service.metrics is None
        assert service.delayed.metrics is NULL_RECORDER
        assert _listening_ports() == before
    finally:
        service.close()
        storage.close()


def test_the_endpoint_lives_as_long_as_the_service(tmp_path: Path) -> None:
    service, storage = _service(tmp_path, metrics_port=0, poll_interval=0.05)
    assert service.metrics is not None
    # a due job, so a pass takes the delayed lock (an idle pass takes none)
    Client(storage).schedule("t.due")
    service.start()
    try:
        url = service.metrics.url
        assert url is not None and service.metrics.port in _listening_ports()
        samples = wait_until(
            lambda: (
                (s := scrape(url))
                and value(s, "lock_held", lock="delayed-scheduler", shard="0")
                and s
            ),
            10,
        )
        assert value(samples, "storage_up") == 1
        # The heartbeat gauge shows when the liveness record was last written
        before = service.heartbeat.last_beat
        beat = value(scrape(url), "heartbeat_timestamp_seconds")
        assert before is not None and before <= beat <= (service.heartbeat.last_beat or 0)
        port = service.metrics.port
    finally:
        service.close()
        storage.close()
    assert port not in _listening_ports()


def test_a_busy_port_is_refused_by_name(tmp_path: Path) -> None:
    first, storage = _service(tmp_path, metrics_port=0)
    assert first.metrics is not None
    first.metrics.start()
    try:
        second = MetricsServer(storage, "127.0.0.1", first.metrics.port or 0)
        with pytest.raises(ConfigurationError, match="metrics_port"):
            second.start()
    finally:
        first.close()
        storage.close()


@pytest.mark.parametrize("port", [-1, 65536, "9100", True, 1.5])
def test_a_bad_port_is_refused_by_name(port: object) -> None:
    with pytest.raises(ConfigurationError, match="metrics_port"):
        Settings(metrics_port=port)  # type: ignore[arg-type]


def test_a_bad_port_option_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from parallel_scheduler.cli import main

    code = main(["run", "--broker-url", "memory://", "--metrics-port", "70000", "--once"])
    assert code == 2
    assert "metrics_port" in capsys.readouterr().err
