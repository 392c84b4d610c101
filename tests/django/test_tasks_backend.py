"""``DurableBackend`` against real stores (SQLite, PostgreSQL, Redis): what an enqueue writes,
what it refuses (and then writes nothing), deferral to ``run_after``, the mapping of queue and
priority onto Celery's, and ``get_result`` through every state a stored job and its recorded
outcomes can be in."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from parallel_scheduler import Client
from parallel_scheduler.contrib.django import conf
from parallel_scheduler.contrib.django.task_api import (
    InvalidTask,
    TaskResultDoesNotExist,
    status,
    task_backends,
)
from parallel_scheduler.contrib.django.task_backend import CELERY_TASK, celery_priority
from parallel_scheduler.contrib.django.task_results import JobCancelled, JobUnsendable
from parallel_scheduler.contrib.django.task_runner import DjangoTaskRefused, run_django_task
from storage_adapters import JobState, OutcomeEvent, OutcomeState
from tests.conftest import unique_prefix
from tests.django import task_functions

BACKEND = "parallel_scheduler.contrib.django.tasks.DurableBackend"
WRITE_FILE = "tests.django.task_functions.write_file"


def tasks_setting(**options: Any) -> dict[str, Any]:
    return {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "fast", "slow"], "OPTIONS": options}
    }


@pytest.fixture
def client(adapter_url: str) -> Iterator[Client]:
    """The backend over a store of its own (the adapter's URL, a new prefix); dropped after."""
    scheduler = {"storage_url": adapter_url, "prefix": unique_prefix()}
    with override_settings(PARALLEL_SCHEDULER=scheduler, TASKS=tasks_setting()):
        conf.reset()
        made = conf.get_client()
        made.setup()
        try:
            yield made
        finally:
            made.storage.drop()
            conf.reset()


def release(client: Client, job_id: str) -> None:
    """What a scheduler does to a due job: claim it, then mark it handed to the broker."""
    storage = client.storage
    lock = storage.acquire_lock("delayed-scheduler", "test", 30)
    assert lock is not None
    claims = [c for c in storage.claim_due(100, lock, 30) if c.id == job_id]
    assert storage.mark_enqueued(claims) == [job_id]


def record(client: Client, job_id: str, *states: tuple[OutcomeState, str | None]) -> None:
    at = time.time() + len(client.storage.outcome_history(job_id))  # after those recorded
    events = [
        OutcomeEvent(job_id, CELERY_TASK, state, at + n, "w1@host", error=error)
        for n, (state, error) in enumerate(states)
    ]
    client.storage.record_outcomes(events)


def test_enqueue_stores_a_job_due_now_named_for_the_one_celery_task(client: Client) -> None:
    # Given the backend, When a task is enqueued without run_after
    before = datetime.now(timezone.utc)
    result = task_functions.write_file.enqueue("/tmp/never", "hello")
    # Then the result is READY, and its id is a stored job due now for the Celery task
    assert result.status == status["ready"] and result.backend == "default"
    assert result.args == ["/tmp/never", "hello"] and result.enqueued_at is not None
    job = client.get(result.id)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.task == CELERY_TASK
    assert job.kwargs["module_path"] == WRITE_FILE
    assert job.kwargs["args"] == ["/tmp/never", "hello"] and job.kwargs["kwargs"] == {}
    assert job.kwargs["meta"] == {
        "backend": "default",
        "priority": 0,
        "queue_name": "default",
        "run_after": None,
    }
    assert job.options == {"priority": 4}  # Django's default priority; Celery's default queue
    assert before - timedelta(seconds=5) <= job.due_at <= datetime.now(timezone.utc)
    # And get_result reads it back as enqueued
    read = task_functions.write_file.get_result(result.id)
    assert read.status == status["ready"] and read.args == result.args
    assert read.task.func is task_functions.write_file.func


def test_run_after_defers_the_job_to_that_instant(client: Client) -> None:
    run_after = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=3)
    result = task_functions.write_file.using(run_after=run_after).enqueue("/tmp/x", text="later")
    job = client.get(result.id)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.due_at == run_after
    assert job.kwargs["kwargs"] == {"text": "later"}
    assert job.kwargs["meta"]["run_after"] == run_after.isoformat()
    read = task_functions.write_file.get_result(result.id)
    assert read.status == status["ready"] and read.task.run_after == run_after


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        ((object(),), {}, "not JSON serializable"),
        ((float("nan"),), {}, "Out of range float"),
        ((), {"text": {1: "a"}}, "key that is not text"),
        ((), {"text": b"bytes"}, "bytes is not JSON"),
    ],
)
def test_arguments_that_are_not_json_are_refused_and_nothing_is_written(
    client: Client, args: tuple[Any, ...], kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidTask) as refused:
        task_functions.write_file.enqueue("/tmp/x", *args, **kwargs)
    assert named in str(refused.value) and WRITE_FILE in str(refused.value)
    assert sum(client.counts().values()) == 0


def test_queue_and_priority_map_onto_celery_options(client: Client) -> None:
    options = {"queues": {"fast": "celery-fast"}, "priority_order": "lower_first"}
    with override_settings(TASKS=tasks_setting(**options)):
        fast = task_functions.write_file.using(queue_name="fast", priority=100).enqueue("/a", "")
        slow = task_functions.write_file.using(queue_name="slow", priority=-100).enqueue("/a", "")
        read = task_functions.write_file.get_result(fast.id)
    assert client.get(fast.id).options == {"queue": "celery-fast", "priority": 0}  # type: ignore[union-attr]
    assert client.get(slow.id).options == {"queue": "slow", "priority": 9}  # type: ignore[union-attr]
    assert read.task.queue_name == "fast" and read.task.priority == 100
    assert [celery_priority(p) for p in (-100, -1, 0, 50, 100)] == [0, 4, 4, 6, 9]


def test_a_queue_the_backend_does_not_list_is_refused(client: Client) -> None:
    with pytest.raises(InvalidTask, match="other"):
        task_functions.write_file.using(queue_name="other")
    assert sum(client.counts().values()) == 0


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"colour": "red"}, "unknown option"),
        ({"priority_levels": 0}, "priority_levels"),
        ({"priority_order": "random"}, "priority_order"),
        ({"send_options": {"queue": "q"}}, "send_options"),
        ({"send_options": {"serializer": "pickle"}}, "send_options"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, Any], named: str) -> None:
    with (
        override_settings(TASKS=tasks_setting(**options)),
        pytest.raises(ImproperlyConfigured, match=named),
    ):
        task_backends["default"]


def test_get_result_follows_the_job_and_its_outcomes(client: Client) -> None:
    # Given an enqueued task, released to the broker
    result = task_functions.write_file.enqueue("/tmp/x", "y")
    release(client, result.id)
    read = task_functions.write_file.get_result
    assert read(result.id).status == status["ready"]  # handed over, no worker yet
    # When a worker receives and starts it, Then it is RUNNING, on that worker
    record(client, result.id, (OutcomeState.RECEIVED, None), (OutcomeState.STARTED, None))
    running = read(result.id)
    assert running.status == status["running"] and running.worker_ids == ["w1@host"]
    assert running.started_at is not None and running.finished_at is None
    # When it succeeds, Then it is SUCCESSFUL, finished after it started
    record(client, result.id, (OutcomeState.SUCCEEDED, None))
    done = read(result.id)
    assert done.status == status["successful"] and done.is_finished
    assert done.finished_at >= done.started_at >= done.enqueued_at - timedelta(seconds=5)
    assert done.return_value is None and done.errors == []  # return values are not kept


def test_a_failed_run_is_failed_with_its_error(client: Client) -> None:
    result = task_functions.fail.enqueue("boom")
    release(client, result.id)
    record(
        client,
        result.id,
        (OutcomeState.STARTED, None),
        (OutcomeState.FAILED, "ValueError: boom"),
    )
    failed = task_functions.fail.get_result(result.id)
    assert failed.status == status["failed"]
    [error] = failed.errors
    assert error.exception_class is ValueError and error.traceback == "ValueError: boom"


def test_a_cancelled_or_unsendable_job_is_failed_saying_why(client: Client) -> None:
    cancelled = task_functions.write_file.enqueue("/tmp/x", "y")
    assert client.cancel(cancelled.id)
    result = task_functions.write_file.get_result(cancelled.id)
    assert result.status == status["failed"]
    assert result.errors[0].exception_class is JobCancelled
    unsendable = task_functions.write_file.enqueue("/tmp/x", "z")
    storage = client.storage
    lock = storage.acquire_lock("delayed-scheduler", "test", 30)
    assert lock is not None
    storage.fail([c for c in storage.claim_due(10, lock, 30) if c.id == unsendable.id], "no route")
    failed = task_functions.write_file.get_result(unsendable.id)
    assert failed.status == status["failed"] and failed.errors[0].exception_class is JobUnsendable
    assert "no route" in failed.errors[0].traceback


def test_unknown_ids_do_not_exist(client: Client) -> None:
    backend = task_backends["default"]
    for unknown in ("no-such-job", "x" * 500, ""):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(unknown)
    other = client.schedule("tasks.not_django", countdown=60).job_id  # not a Django task's call
    with pytest.raises(TaskResultDoesNotExist, match=r"not a django\.tasks call"):
        backend.get_result(other)


def test_the_celery_side_runs_only_tasks_of_a_durable_backend(
    client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    meta = {"backend": "default", "priority": 0, "queue_name": "default", "run_after": None}
    # a task of this backend runs
    run_django_task(WRITE_FILE, [str(out), "ran"], {}, meta)
    assert out.read_text() == "ran"
    # anything else is refused by name, and does not run
    refused = {
        "tests.django.task_functions.plain_function": "is not a django.tasks task",
        "tests.django.no_such_module.task": "does not import",
    }
    for path, named in refused.items():
        with pytest.raises(DjangoTaskRefused, match=named):
            run_django_task(path, [str(tmp_path / "no")], {}, meta)
    with pytest.raises(DjangoTaskRefused, match="no task backend 'other'"):
        run_django_task(WRITE_FILE, [str(tmp_path / "no"), ""], {}, {**meta, "backend": "other"})
    immediate = {
        "default": {"BACKEND": task_functions.api_name + ".backends.immediate.ImmediateBackend"}
    }
    with (
        override_settings(TASKS=immediate),
        pytest.raises(DjangoTaskRefused, match="not DurableBackend"),
    ):
        run_django_task(WRITE_FILE, [str(tmp_path / "no"), ""], {}, meta)
    assert not (tmp_path / "no").exists()
