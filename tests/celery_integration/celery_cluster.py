"""A test's own Celery world: a queue, a storage prefix, a record of executions and real
``celery worker`` processes (``tests.celery_integration.plugin_celery_app``), ended by pid when the
test ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

import parallel_scheduler.celery
import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import JobState
from storage_adapters import Storage
from tests.celery_apps import worker_command
from tests.conftest import REDIS_URL, require_server

ROOT = Path(__file__).resolve().parents[2]
RABBITMQ_URL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"
)


class Cluster:
    """One test's queue, storage prefix, records and worker processes (ended by pid)."""

    def __init__(self, broker_url: str, tmp_path: Path, fast_publish: bool = False) -> None:
        run = uuid.uuid4().hex[:10]
        self.fast_publish = fast_publish
        self.queue = f"ps-plugin-{run}"
        self.prefix = f"t{run}"
        self.key = f"ps-plugin:{run}:executed"
        self.broker_url = broker_url
        self.tmp_path = tmp_path
        self.records = redis.Redis.from_url(REDIS_URL)
        self.env = dict(
            os.environ,
            PS_BROKER_URL=broker_url,
            PS_RECORD_URL=REDIS_URL,
            PS_RECORD_KEY=self.key,
            PS_QUEUE=self.queue,
            PARALLEL_SCHEDULER_STORAGE_URL=REDIS_URL,
            PARALLEL_SCHEDULER_PREFIX=self.prefix,
            PARALLEL_SCHEDULER_LOCK_LEASE="2",
            PARALLEL_SCHEDULER_FAST_PUBLISH=str(fast_publish).lower(),
        )
        self.workers: list[subprocess.Popen[bytes]] = []
        self.storage: Storage = storage_adapters.from_url(REDIS_URL, prefix=self.prefix)
        self.storage.setup()

    def start_worker(self, *extra: str, queue: str | None = None) -> subprocess.Popen[bytes]:
        name = f"w{len(self.workers)}-{self.queue}"
        command = worker_command(
            "tests.celery_integration.plugin_celery_app", queue or self.queue, name, *extra
        )
        log = (self.tmp_path / f"{name}.log").open("wb")
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.workers.append(process)
        return process

    def wait_ready(self, count: int) -> None:
        wait_until(lambda: self.records.llen(self.key + ":ready") >= count, timeout=60)

    def producer(self) -> Celery:
        """The calling side: an app like the user's, with the plugin installed."""
        app = Celery("producer", broker=self.broker_url)
        app.conf.update(task_serializer="json", task_default_queue=self.queue)
        app.conf.parallel_scheduler_eta_threshold = 1.0
        parallel_scheduler.celery.install(
            app,
            storage_url=REDIS_URL,
            prefix=self.prefix,
            poll_interval=0.1,
            fast_publish=self.fast_publish,
        )

        @app.task(name="plugin.record", shared=False)  # type: ignore[untyped-decorator]
        def record(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("runs on the worker, never here")

        return app

    def has_envelope(self, job_id: str) -> bool:
        return bool(self.records.hget(f"{{{self.prefix}}}:job:{job_id}", "envelope"))

    def still_scheduled(self, job_id: str) -> bool:
        job = self.storage.get_job(job_id)
        return job is not None and job.state is JobState.SCHEDULED

    def executions(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.records.lrange(self.key, 0, -1)]

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.records.delete(self.key, self.key + ":ready", self.queue)
        self.records.delete(
            f"_kombu.binding.{self.queue}", f"_kombu.binding_permanent.{self.queue}"
        )
        self.storage.drop()
        self.storage.close()


def broker_url(kind: str) -> str:
    require_server("redis")
    if kind == "rabbitmq":
        require_server("rabbitmq")
        return RABBITMQ_URL
    return REDIS_URL


#: The brokers (and release paths) a test runs on, as ``pytest.fixture(params=…)``.
KINDS = ["redis", "redis+fast_publish", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)]


def running(kind: str, tmp_path: Path) -> Iterator[Cluster]:
    """A fixture body: one cluster of ``kind`` (a ``KINDS`` value), closed when the test ends."""
    broker, _, fast = kind.partition("+")
    made = Cluster(broker_url(broker), tmp_path, fast_publish=bool(fast))
    try:
        yield made
    finally:
        made.close()
