"""examples/celery_app does what its README says, on Redis and on RabbitMQ.

A real ``celery -A proj worker --parallel-scheduler`` process runs the example project unchanged;
``schedule_some.py`` makes its calls; the tasks' journal file shows every call running once, at or
shortly after its due time, and the cancelled call never. Only the delays are shortened (through
the documented ``PARALLEL_SCHEDULER_ETA_THRESHOLD`` override), so a run takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import wait_until
from parallel_scheduler import Client
from storage_adapters import JobState
from tests.conftest import RABBITMQ_URL, REDIS_URL, require_server

pytestmark = pytest.mark.celery
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "celery_app"
THRESHOLD, BELOW, BEYOND = 2.0, 1.0, 3.5
LATENESS_ALLOWED = 3.0  # seconds after its due time a call must have run by


@dataclass
class Worker:
    broker: str
    broker_url: str
    queue: str
    env: dict[str, str]
    journal: Path
    storage_url: str
    log: Path


def _broker_url(broker: str) -> str:
    require_server(broker)
    return REDIS_URL if broker == "redis" else RABBITMQ_URL


def _queue_length(broker: str, broker_url: str, queue: str) -> int:
    """Messages waiting in the broker queue (not those a worker holds unacknowledged)."""
    if broker == "redis":  # kombu's passive declare fails once Redis dropped the empty list
        import redis

        return int(redis.Redis.from_url(broker_url).llen(queue))
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        return int(declared.message_count)


def _delete_queue(broker: str, broker_url: str, queue: str) -> None:
    if broker == "redis":
        import redis

        # recent kombu (5.7) also keeps a "permanent" binding set per exchange, named as the queue
        keys = (queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        redis.Redis.from_url(broker_url).delete(*keys)
        return
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        channel = connection.default_channel
        channel.queue_delete(queue)
        channel.exchange_delete(queue)  # Celery names the default exchange after the queue


def _example_environment(**extra: str) -> dict[str, str]:
    """The test's environment without PARALLEL_SCHEDULER_* settings that would override the
    example's own configuration (they beat ``app.conf``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PARALLEL_SCHEDULER_") or k.startswith("PARALLEL_SCHEDULER_TEST_")
    }
    env.pop("CELERY_QUEUE", None)
    env.update(extra)
    return env


@pytest.fixture(
    params=[pytest.param("redis", marks=pytest.mark.redis), pytest.param("rabbitmq")],
)
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Worker]:
    """The example's worker with the scheduler flag, on its own queue and storage file."""
    broker = str(request.param)
    broker_url = _broker_url(broker)
    run = uuid.uuid4().hex[:10]
    queue, hostname = f"ps-example-{run}", f"example-{run}@%h"
    storage_url = f"sqlite:///{tmp_path / 'schedule.db'}"
    journal, log = tmp_path / "journal.jsonl", tmp_path / "worker.log"
    env = _example_environment(
        BROKER_URL=broker_url,
        STORAGE_URL=storage_url,
        CELERY_QUEUE=queue,
        JOURNAL_FILE=str(journal),
        PARALLEL_SCHEDULER_ETA_THRESHOLD=str(THRESHOLD),
        PARALLEL_SCHEDULER_POLL_INTERVAL="0.2",
    )
    command = [
        sys.executable, "-m", "celery", "-A", "proj", "worker", "--parallel-scheduler",
        "-Q", queue, "-c", "2", "--without-gossip", "--without-mingle", "--without-heartbeat",
        "--loglevel=INFO", f"--hostname={hostname}",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=EXAMPLE, env=env, stdout=out, stderr=out)
    try:
        ready = f"example-{run}@"

        def started() -> bool:
            text = log.read_text(errors="replace")
            return process.poll() is not None or any(
                ready in line and line.rstrip().endswith("ready.") for line in text.splitlines()
            )

        wait_until(started, timeout=30, interval=0.1)
        assert process.poll() is None, log.read_text(errors="replace")
        yield Worker(broker, broker_url, queue, env, journal, storage_url, log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        _delete_queue(broker, broker_url, queue)


def _journal(worker: Worker) -> list[dict[str, Any]]:
    if not worker.journal.exists():
        return []
    return [json.loads(line) for line in worker.journal.read_text().splitlines() if line]


def _log(worker: Worker) -> str:
    return f"worker log:\n{worker.log.read_text(errors='replace')}"


def test_example_runs_each_call_once_at_its_due_time(worker: Worker) -> None:
    # When schedule_some.py makes its calls against the running worker
    done = subprocess.run(
        [sys.executable, "schedule_some.py", "--below", str(BELOW), "--beyond", str(BEYOND),
         "--json"],
        cwd=EXAMPLE, env=worker.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)
    # Then each call took the path its delay calls for
    assert [c["path"] for c in calls] == ["celery", "storage", "storage", "storage", "storage"]
    assert [c["cancelled"] for c in calls] == [False, False, False, False, True]
    expected = {c["id"]: c for c in calls if not c["cancelled"]}
    cancelled = next(c["id"] for c in calls if c["cancelled"])

    # And every call that was not cancelled runs
    try:
        wait_until(lambda: {e["id"] for e in _journal(worker)} >= set(expected), timeout=20)
        # until storage holds nothing more to release and the broker queue is drained, so a
        # second delivery of any call would have run by now
        with Client(storage_url=worker.storage_url) as client:
            wait_until(lambda: client.counts()["enqueued"] == 3, timeout=10)
            counts = client.counts()
            state_of_cancelled = client.get(cancelled)
        wait_until(
            lambda: _queue_length(worker.broker, worker.broker_url, worker.queue) == 0, timeout=10
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_log(worker)}") from None

    # Then each ran exactly once, never before it was due and not long after
    ran = _journal(worker)
    assert Counter(e["id"] for e in ran) == Counter(list(expected)), _log(worker)
    for entry in ran:
        due = expected[entry["id"]]["due"]
        assert due <= entry["at"] <= due + LATENESS_ALLOWED, (entry, expected[entry["id"]])
    assert cancelled not in {e["id"] for e in ran}
    assert counts["scheduled"] == counts["claimed"] == 0
    assert counts["cancelled"] == 1
    assert state_of_cancelled is not None and state_of_cancelled.state is JobState.CANCELLED
