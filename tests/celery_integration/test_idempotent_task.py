"""``IdempotentTask``: a task id delivered twice runs once, on a real ``celery worker``.

The duplicates are the ones the scheduler can produce (the same job id sent again after a crash
between send and mark) and the ones Celery's Redis broker produces (a re-delivery while the first
delivery still runs). A retry, which reuses the task id on purpose, still runs.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from devtools.processes import stop_process
from devtools.waiting import wait_until
from parallel_scheduler.celery import IdempotentTask
from parallel_scheduler.errors import ConfigurationError
from tests.celery_apps import worker_command
from tests.conftest import REDIS_URL, require_server

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One real worker on its own queue, record keys and idempotency prefix; ended by pid."""

    def __init__(self, tmp_path: Path) -> None:
        run = uuid.uuid4().hex[:10]
        self.queue = f"ps-idem-{run}"
        self.key = f"ps-idem:{run}"
        self.prefix = f"ps-idem-test:{run}"
        self.records = redis.Redis.from_url(REDIS_URL, decode_responses=True)
        env = dict(
            os.environ,
            PS_IDEM_BROKER_URL=REDIS_URL,
            PS_IDEM_KEY=self.key,
            PS_IDEM_QUEUE=self.queue,
            PS_IDEM_PREFIX=self.prefix,
        )
        command = worker_command(
            "tests.celery_integration.idempotent_celery_app", self.queue, f"idem-{run}"
        )
        self.log = tmp_path / "worker.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.producer = Celery("producer", broker=REDIS_URL)
        self.producer.conf.update(task_serializer="json", task_default_queue=self.queue)

    def wait_ready(self) -> None:
        ready = self.key + ":ready"
        wait_until(lambda: self.records.llen(ready) or self.process.poll() is not None, 60)
        assert self.process.poll() is None, self.log.read_text()

    def send(self, name: str, args: tuple[Any, ...], task_id: str) -> None:
        self.producer.send_task(name, args, task_id=task_id, queue=self.queue)

    def listed(self, suffix: str) -> list[str]:
        return [str(item) for item in self.records.lrange(self.key + suffix, 0, -1)]

    def close(self) -> None:
        stop_process(self.process, timeout=30)
        suffixes = (":runs", ":skips", ":completed", ":ready")
        self.records.delete(*(self.key + s for s in suffixes), self.queue)
        for stale in self.records.scan_iter(match=self.prefix + ":*"):
            self.records.delete(stale)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    require_server("redis")
    made = Worker(tmp_path)
    try:
        made.wait_ready()
        yield made
    finally:
        made.close()


@pytest.mark.celery
@pytest.mark.redis
@pytest.mark.slow
def test_a_duplicated_delivery_runs_once(worker: Worker) -> None:
    # Given a task id delivered twice at once: the second arrives while the first runs
    worker.send("idem.slow", (1.0,), task_id="dup-a")
    worker.send("idem.slow", (1.0,), task_id="dup-a")
    worker.send("idem.slow", (0.0,), task_id="single-b")
    wait_until(lambda: len(worker.listed(":skips")) >= 1, timeout=30)
    wait_until(lambda: worker.records.get(f"{worker.prefix}:dup-a") == "done", timeout=30)
    # And delivered a third time after it ran (a scheduler re-sending it after a crash)
    worker.send("idem.slow", (0.0,), task_id="dup-a")
    wait_until(lambda: len(worker.listed(":skips")) >= 2, timeout=30)
    wait_until(lambda: worker.records.llen(worker.queue) == 0, timeout=30)
    # Then the body ran once per id, and each repeat was skipped, saying why
    assert Counter(worker.listed(":runs")) == {"dup-a": 1, "single-b": 1}
    assert worker.listed(":skips") == ["dup-a running", "dup-a done"]
    assert "skipped: this task id has already run" in worker.log.read_text()


@pytest.mark.celery
@pytest.mark.redis
@pytest.mark.slow
def test_a_retry_reuses_the_id_and_still_runs(worker: Worker) -> None:
    # Given a task that asks for a retry on its first attempt (the retry has the same id)
    worker.send("idem.flaky", (), task_id="retry-c")
    wait_until(lambda: worker.listed(":completed") == ["retry-c"], timeout=30)
    # Then both attempts ran and it completed once; a later repeat of the id is skipped
    worker.send("idem.flaky", (), task_id="retry-c")
    wait_until(lambda: worker.listed(":skips") == ["retry-c done"], timeout=30)
    assert worker.listed(":runs") == ["retry-c", "retry-c"]
    assert worker.listed(":completed") == ["retry-c"]


def _app(**conf: Any) -> Celery:
    app = Celery("idempotent-config", set_as_current=False)
    app.conf.update(conf)
    return app


def test_the_records_redis_comes_from_the_setting_or_a_redis_storage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("STORAGE_URL", "IDEMPOTENCY_URL"):
        monkeypatch.delenv(f"PARALLEL_SCHEDULER_{name}", raising=False)

    def task_on(app: Celery) -> IdempotentTask:
        @app.task(base=IdempotentTask, name="config.check", shared=False)  # type: ignore[untyped-decorator]
        def check() -> str:
            return "ran"

        return app.tasks["config.check"]  # type: ignore[no-any-return]

    redis_storage = task_on(_app(parallel_scheduler_storage_url="redis://h:6379/3"))
    assert redis_storage.idempotency_redis_url() == "redis://h:6379/3"
    explicit = task_on(
        _app(
            parallel_scheduler_storage_url="postgresql://u:secret@db/jobs",
            parallel_scheduler_idempotency_url="redis://r:6379/1",
        )
    )
    assert explicit.idempotency_redis_url() == "redis://r:6379/1"
    sql_storage = task_on(_app(parallel_scheduler_storage_url="postgresql://u:secret@db/jobs"))
    with pytest.raises(ConfigurationError, match="parallel_scheduler_idempotency_url") as raised:
        sql_storage.idempotency_redis_url()
    assert "secret" not in str(raised.value)
    # A direct call has no task id: nothing to deduplicate, and no Redis is needed
    assert sql_storage() == "ran"
    monkeypatch.setenv("PARALLEL_SCHEDULER_IDEMPOTENCY_URL", "redis://env:6379/2")
    assert sql_storage.idempotency_redis_url() == "redis://env:6379/2"
