"""``DurableBackend`` end to end: a real ``celery worker --parallel-scheduler`` of a Django
project (``worker_settings``, ``worker_celery``) on a Redis broker queue of its own, sharing a
SQLite scheduler store with this process, runs deferred ``django.tasks`` tasks when they are
due; ``get_result`` here follows them to SUCCESSFUL or FAILED with the error."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings

from devtools.processes import ChildProcess, clean_environment
from devtools.waiting import wait_until
from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.task_api import status
from storage_adapters import JobState
from tests.conftest import REDIS_URL, require_server
from tests.django import task_functions

TASKS = {
    "default": {
        "BACKEND": "parallel_scheduler.contrib.django.tasks.DurableBackend",
        "QUEUES": ["default"],
    }
}


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[ChildProcess]:
    """A worker with the scheduler inside it, on a queue of its own; this process's backend
    over the same SQLite store. Ended by its pid."""
    require_server("redis")
    queue = f"ps-django-{uuid.uuid4().hex[:10]}"
    storage_url = f"sqlite:///{tmp_path / 'scheduler.sqlite3'}"
    env = clean_environment(
        DJANGO_SETTINGS_MODULE="tests.django.worker_settings",
        PS_DJANGO_SCRATCH=str(tmp_path),
        PS_DJANGO_STORAGE_URL=storage_url,
        PS_DJANGO_BROKER_URL=REDIS_URL,
        PS_DJANGO_QUEUE=queue,
    )
    command = [
        sys.executable, "-m", "celery", "-A", "tests.django.worker_celery", "worker",
        "--parallel-scheduler", "--pool", "solo", "-Q", queue, "--without-gossip",
        "--without-mingle", "--without-heartbeat", "--loglevel=INFO", f"--hostname={queue}@%h",
    ]  # fmt: skip
    with override_settings(PARALLEL_SCHEDULER={"storage_url": storage_url}, TASKS=TASKS):
        conf.reset()
        conf.get_client().setup()
        process = ChildProcess(tmp_path, "worker", command, env)
        try:
            yield process
        finally:
            process.stop()
            conf.reset()
            broker = redis.Redis.from_url(REDIS_URL)
            broker.delete(queue, f"_kombu.binding.{queue}")
            broker.close()


def finished(worker: ChildProcess, get: Any, result_id: str) -> Any:
    """The result once it is finished (the worker must stay up meanwhile), else ``None``."""
    assert worker.alive(), worker.log()
    result = get(result_id)
    return result if result.is_finished else None


def test_a_deferred_task_runs_on_the_worker_when_due(worker: ChildProcess, tmp_path: Path) -> None:
    # Given a task deferred by two seconds
    out = tmp_path / "written.txt"
    run_after = datetime.now(timezone.utc) + timedelta(seconds=2)
    result = task_functions.write_file.using(run_after=run_after).enqueue(str(out), "done")
    # Then it waits in storage, not on the worker
    job = conf.get_client().get(result.id)
    assert job is not None and job.state is JobState.SCHEDULED and not out.exists()
    # When it is due, Then the worker runs it and get_result says it succeeded
    done = wait_until(
        lambda: finished(worker, task_functions.write_file.get_result, result.id), timeout=90
    )
    assert done.status == status["successful"], (done.errors, worker.log())
    assert out.read_text() == "done"
    assert done.started_at >= run_after - timedelta(seconds=0.5)  # not before it was due
    assert done.finished_at >= done.started_at and len(done.worker_ids) == 1
    assert done.worker_ids[0].startswith("ps-django-")


def test_a_failing_task_ends_failed_with_its_error(worker: ChildProcess) -> None:
    run_after = datetime.now(timezone.utc) + timedelta(seconds=1)
    result = task_functions.fail.using(run_after=run_after).enqueue("it broke")
    failed = wait_until(
        lambda: finished(worker, task_functions.fail.get_result, result.id), timeout=90
    )
    assert failed.status == status["failed"], worker.log()
    [error] = failed.errors
    assert error.exception_class is ValueError
    assert error.traceback == "ValueError: it broke"
    with pytest.raises(ValueError, match="failed"):
        failed.return_value  # noqa: B018  # the API's own refusal


def test_a_task_that_takes_context_gets_its_result_id(worker: ChildProcess, tmp_path: Path) -> None:
    out = tmp_path / "context.json"
    result = task_functions.write_context.enqueue(str(out))
    done = wait_until(
        lambda: finished(worker, task_functions.write_context.get_result, result.id), timeout=90
    )
    assert done.status == status["successful"], (done.errors, worker.log())
    assert json.loads(out.read_text()) == {"id": result.id, "attempt": 1, "args": [str(out)]}
