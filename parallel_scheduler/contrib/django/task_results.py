"""A ``django.tasks`` ``TaskResult`` read back from storage: the stored job says which Django
task was called, with what and when; the outcomes workers recorded (``OutcomeStore``) say what
became of it.

Status: a job waiting in storage (scheduled, claimed) or handed to the broker with no outcome
yet, or received, or retried, is READY; started is RUNNING; succeeded is SUCCESSFUL; failed,
revoked, cancelled, expired, or set aside as unsendable (``failed`` job) is FAILED, with an
error saying why. Return values are not kept: outcomes record states, not values.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

from parallel_scheduler.contrib.django.task_api import (
    Task,
    TaskError,
    TaskResultDoesNotExist,
    make_result,
    status,
)
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import ParallelSchedulerError
from parallel_scheduler.jobs import Job, utc_datetime
from storage_adapters import JobState, OutcomeEvent, OutcomeState

__all__ = [
    "JobCancelled",
    "JobExpired",
    "JobRevoked",
    "JobUnsendable",
    "build_result",
    "load_task",
    "read_result",
    "task_error",
]


class JobCancelled(ParallelSchedulerError):
    """The task's job was cancelled in storage before it was sent: it never ran."""


class JobExpired(ParallelSchedulerError):
    """The task's job expired (its ``expires`` passed) before it was sent: it never ran."""


class JobRevoked(ParallelSchedulerError):
    """The task was revoked in Celery before it ran."""


class JobUnsendable(ParallelSchedulerError):
    """The task's job could not be sent to the broker and was set aside (``failed``)."""


def _path(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def task_error(text: str | None, default: type[BaseException] = Exception) -> Any:
    """A ``TaskError`` from a recorded error, ``"Type: message"``: the type's full path for a
    built-in exception, its bare name otherwise (outcomes keep the name only); the text stands
    in for the traceback, which is not recorded."""
    text = text or default.__name__
    name, sep, _ = text.partition(":")
    found = getattr(builtins, name, None) if sep else None
    if isinstance(found, type) and issubclass(found, BaseException):
        path = _path(found)
    elif sep and name.isidentifier():
        path = name
    else:
        path = _path(default)
    return TaskError(exception_class_path=path, traceback=text)


def load_task(module_path: str) -> Any:
    """The ``django.tasks`` task at ``module_path``; ``ValueError`` naming why when there is
    none (a module or name that does not import, or something else than a task)."""
    from django.utils.module_loading import import_string

    try:
        found = import_string(module_path)
    except ImportError as exc:
        raise ValueError(f"task {module_path!r} does not import: {exc}") from None
    if not isinstance(found, Task):
        raise ValueError(f"{module_path!r} is not a django.tasks task ({type(found).__name__})")
    return found


def build_result(
    task: Any, result_id: str, alias: str, args: Any, kwargs: Any, **fields: Any
) -> Any:
    """A ``TaskResult``: READY with no times unless ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "status": status["ready"],
        "enqueued_at": None,
        "started_at": None,
        "finished_at": None,
        "last_attempted_at": None,
        "errors": [],
        "worker_ids": [],
    }
    values.update(fields)
    return make_result(task=task, id=result_id, args=args, kwargs=kwargs, backend=alias, **values)


def _from_outcomes(events: list[OutcomeEvent]) -> dict[str, Any]:
    """Status, times, errors and workers from a released job's recorded outcomes."""
    fields: dict[str, Any] = {"status": status["ready"], "errors": [], "worker_ids": []}
    for event in events:
        at = utc_datetime(event.at)
        if event.state is OutcomeState.STARTED:
            fields["status"] = status["running"]
            fields.setdefault("started_at", at)
            fields["last_attempted_at"] = at
            fields["worker_ids"].append(event.worker or "?")
        elif event.state is OutcomeState.SUCCEEDED:
            fields.update(status=status["successful"], finished_at=at)
        elif event.state in (OutcomeState.FAILED, OutcomeState.REVOKED):
            default = JobRevoked if event.state is OutcomeState.REVOKED else Exception
            fields["errors"].append(task_error(event.error, default))
            fields.update(status=status["failed"], finished_at=at)
        elif event.state is OutcomeState.RETRIED:
            fields["errors"].append(task_error(event.error))
            fields["status"] = status["ready"]
    return fields


_NEVER_RAN: dict[JobState, type[Exception]] = {
    JobState.CANCELLED: JobCancelled,
    JobState.EXPIRED: JobExpired,
    JobState.FAILED: JobUnsendable,
}


def _fields(job: Job, events: list[OutcomeEvent]) -> dict[str, Any]:
    if job.state in _NEVER_RAN:
        error = _NEVER_RAN[job.state]
        text = f"{error.__name__}: {job.last_error or error.__doc__}"
        return {
            "status": status["failed"],
            "finished_at": job.updated_at,
            "errors": [TaskError(exception_class_path=_path(error), traceback=text)],
        }
    if job.state is JobState.ENQUEUED:
        return _from_outcomes(events)
    return {}  # scheduled, held by a pause or claimed: waiting in storage


def _call_of(job: Job) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]]:
    kwargs = job.kwargs
    module_path = kwargs.get("module_path")
    if job.problem or not isinstance(module_path, str):
        raise TaskResultDoesNotExist(f"job {job.id!r} is not a django.tasks call")
    meta = kwargs.get("meta")
    return (
        module_path,
        list(kwargs.get("args") or []),
        dict(kwargs.get("kwargs") or {}),
        meta if isinstance(meta, dict) else {},
    )


def task_as_enqueued(module_path: str, meta: dict[str, Any], alias: str) -> Any:
    """The task at ``module_path`` with the priority, queue and ``run_after`` it was enqueued
    with (``meta``), on backend ``alias``."""
    task = load_task(module_path)
    run_after = meta.get("run_after")
    return task.using(
        priority=meta.get("priority"),
        queue_name=meta.get("queue_name"),
        run_after=None if run_after is None else datetime.fromisoformat(run_after),
        backend=alias,
    )


def read_result(client: Any, result_id: str, alias: str) -> Any:
    """The ``TaskResult`` of job ``result_id``; the API's ``TaskResultDoesNotExist`` when
    storage holds no such job, or one that is not a Django task's call."""
    if not isinstance(result_id, str) or not result_id:
        raise TaskResultDoesNotExist(f"no task result {result_id!r}")
    try:
        job = client.get(result_id)
    except ValueError:  # an id storage refuses (too long, bad characters): there is none
        job = None
    if job is None:
        raise TaskResultDoesNotExist(f"no task result {result_id!r}")
    module_path, args, kwargs, meta = _call_of(job)
    try:
        task = task_as_enqueued(module_path, meta, alias)
    except ValueError as exc:
        raise TaskResultDoesNotExist(f"task result {result_id!r}: {exc}") from None
    events: list[OutcomeEvent] = []
    if job.state is JobState.ENQUEUED:
        events = call_storage(
            lambda: client.storage.outcome_history(result_id), give_up_after=client.retry_for
        )
    fields = {"enqueued_at": job.created_at, **_fields(job, events)}
    return build_result(task, result_id, alias, args, kwargs, **fields)
