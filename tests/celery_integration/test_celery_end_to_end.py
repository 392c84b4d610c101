"""A real ``celery worker`` on the Redis broker executes every scheduled job exactly once."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from devtools.processes import stop_process
from devtools.waiting import wait_until
from parallel_scheduler import CeleryDispatcher, Client, DelayedJobScheduler, JobSpec, Settings
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from storage_adapters import Storage
from tests.celery_apps import worker_command
from tests.conftest import REDIS_URL, require_server

pytestmark = [pytest.mark.celery, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A real worker process consuming its own queue; ended by its pid at the end."""
    require_server("redis")
    run = uuid.uuid4().hex[:10]
    env = dict(
        os.environ,
        PS_E2E_BROKER_URL=REDIS_URL,
        PS_E2E_RECORD_URL=REDIS_URL,
        PS_E2E_RECORD_KEY=f"ps-e2e:{run}:executed",
    )
    queue = f"ps-e2e-{run}"
    command = worker_command(
        "tests.celery_integration.e2e_celery_app", queue, f"e2e-{run}", loglevel="WARNING"
    )
    log = (tmp_path / "worker.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    records = redis.Redis.from_url(REDIS_URL)
    key = env["PS_E2E_RECORD_KEY"]
    try:
        wait_until(lambda: records.get(key + ":ready") or process.poll() is not None, timeout=60)
        assert process.poll() is None, (tmp_path / "worker.log").read_text()
        yield {"queue": queue, "key": key, "records": records, "env": env}
    finally:
        stop_process(process, timeout=30)
        records.delete(
            key,
            key + ":ready",
            queue,
            f"_kombu.binding.{queue}",
            f"_kombu.binding_permanent.{queue}",
        )


def executions(worker: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in worker["records"].lrange(worker["key"], 0, -1)]


def scheduler_warnings(caplog: pytest.LogCaptureFixture) -> str:
    """What the scheduler warned during the test (a job it "may run twice" names itself there),
    shown when the exactly-once check fails, so the failure says which side ran a job twice."""
    return "\n".join(r.getMessage() for r in caplog.records)[-3000:]


@pytest.mark.parametrize(
    ("adapter_kind", "release_mode", "fast_publish", "envelopes"),
    [
        ("sqlite", "per_job", False, False),
        pytest.param("postgresql", "per_job", False, False, marks=pytest.mark.postgresql),
        pytest.param("postgresql", "batch", True, False, marks=pytest.mark.postgresql),
        pytest.param("postgresql", "batch", True, True, marks=pytest.mark.postgresql),
        ("redis", "per_job", False, False),
        ("redis", "per_job", True, True),
        ("redis", "batch", False, False),
        ("redis", "batch", True, False),
        ("redis", "batch", True, True),  # one script moves each batch onto the broker's list
    ],
)
def test_every_job_runs_once_at_or_after_its_due_time(
    worker: dict[str, Any],
    make_storage: Any,
    adapter_kind: str,
    release_mode: str,
    fast_publish: bool,
    envelopes: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.celery_integration.e2e_celery_app import app

    caplog.set_level(logging.WARNING, logger="parallel_scheduler")
    package_logger = logging.getLogger("parallel_scheduler")  # heard even if it stops propagating
    package_logger.addHandler(caplog.handler)

    storage: Storage = make_storage()
    dispatcher = RedisPublisher(app) if fast_publish else CeleryDispatcher(app)
    # Given 300 jobs scheduled through the public API, falling due over two seconds, with
    # their broker messages built as they are accepted or not
    client = Client(storage, envelopes=dispatcher if envelopes else None)
    specs = [
        JobSpec(
            "e2e.record",
            args=[i],
            kwargs={"n": i},
            options={"queue": worker["queue"]},
            countdown=2.0 * i / 300,
        )
        for i in range(300)
    ]
    results = client.schedule_many(specs)
    due = {r.job_id: r.due_at.timestamp() for r in results}
    # When a scheduler releases them into the real broker
    settings = Settings(poll_interval=0.1, release_mode=release_mode, max_degree_of_parallelism=4)
    scheduler = DelayedJobScheduler(storage, dispatcher, settings)
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    try:
        wait_until(lambda: len(executions(worker)) >= len(due), timeout=60)
        # Wait for the broker queue to drain, so a duplicate would have been executed by now
        wait_until(lambda: worker["records"].llen(worker["queue"]) == 0, timeout=30)
    finally:
        scheduler.stop()
        thread.join(timeout=30)
        scheduler.close()
        package_logger.removeHandler(caplog.handler)
    by_script = adapter_kind == "redis" and release_mode == "batch" and fast_publish
    assert scheduler.releases_by_script is by_script
    # Then every job ran exactly once, never before it was due, with its arguments
    runs = executions(worker)
    counts = Counter(r["id"] for r in runs)
    assert counts == Counter(due.keys()), scheduler_warnings(caplog)
    assert all(r["at"] >= due[r["id"]] - 0.05 for r in runs)  # same host clock; 50 ms slack
    assert all(r["args"] == [r["kwargs"]["n"]] for r in runs)
    assert {r["queue"] for r in runs} == {worker["queue"]}


def test_the_fast_path_keeps_priority_lists_and_headers(worker: dict[str, Any]) -> None:
    # Given jobs with priorities and a custom header, handed over by the fast path
    from storage_adapters import ClaimedJob
    from tests.celery_integration.e2e_celery_app import app

    specs = [
        JobSpec("e2e.record", args=[p], kwargs={"n": p}, id=f"fast-{p}",
                options={"queue": worker["queue"], "priority": p, "headers": {"x_tenant": "acme"}})
        for p in (0, 3, 9)
    ]  # fmt: skip
    claims = [
        ClaimedJob(j.id, j.task, j.payload, 0.0, 1, 1) for j in (s.encode(0.0) for s in specs)
    ]
    RedisPublisher(app).dispatch_many(claims)
    # Then the real worker runs each once, with its priority as Celery would have routed it
    wait_until(lambda: len(executions(worker)) >= 3, timeout=30)
    runs = {r["id"]: r for r in executions(worker)}
    assert sorted(runs) == ["fast-0", "fast-3", "fast-9"]
    assert all(runs[f"fast-{p}"]["priority"] == p for p in (0, 3, 9))
