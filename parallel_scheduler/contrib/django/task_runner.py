"""The one Celery task every ``DurableBackend`` job is sent as, ``parallel_scheduler.django_task``:
on a worker it imports the Django task by its module path, checks that the backend it was
enqueued on is a ``DurableBackend`` of this project, and runs it (with a ``TaskContext`` first
when the task ``takes_context``).

It is a ``shared_task``, so it joins every Celery app of the process: a Django project's
``app.autodiscover_tasks()`` imports it through ``parallel_scheduler.contrib.django.tasks``.
"""

from __future__ import annotations

import socket
from typing import Any

from celery import shared_task
from django.utils import timezone

from parallel_scheduler.contrib.django.task_api import TaskContext, status, task_backends
from parallel_scheduler.contrib.django.task_backend import CELERY_TASK, DurableBackend
from parallel_scheduler.contrib.django.task_results import build_result, task_as_enqueued
from parallel_scheduler.errors import ParallelSchedulerError

__all__ = ["DjangoTaskRefused", "django_task", "run_django_task"]


class DjangoTaskRefused(ParallelSchedulerError):
    """The message names no task this worker may run: one that does not import, is no
    ``django.tasks`` task, or was enqueued on a backend that is not a ``DurableBackend``."""


def run_django_task(
    module_path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    meta: dict[str, Any] | None = None,
    *,
    result_id: str = "",
    worker: str = "",
) -> None:
    """Run one enqueued Django task; its exception, if it raises, is the Celery task's."""
    meta = meta or {}
    alias = str(meta.get("backend") or "default")
    try:
        backend = task_backends[alias]
    except Exception as exc:  # the API's InvalidTaskBackendError, of either version
        raise DjangoTaskRefused(f"{module_path}: no task backend {alias!r}: {exc}") from None
    if not isinstance(backend, DurableBackend):
        raise DjangoTaskRefused(
            f"{module_path}: backend {alias!r} is {type(backend).__name__}, not DurableBackend"
        )
    try:
        task = task_as_enqueued(module_path, meta, alias)
    except ValueError as exc:
        raise DjangoTaskRefused(str(exc)) from None
    if task.takes_context:
        now = timezone.now()
        result = build_result(
            task, result_id, alias, args, kwargs, status=status["running"], started_at=now,
            last_attempted_at=now, worker_ids=[worker or socket.gethostname()],
        )  # fmt: skip
        task.call(TaskContext(task_result=result), *args, **kwargs)
    else:
        task.call(*args, **kwargs)


@shared_task(name=CELERY_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
def django_task(
    self: Any,
    module_path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> None:
    """Celery's side of ``DurableBackend``: the return value is not kept (see the docs)."""
    request = self.request
    run_django_task(
        module_path, args, kwargs, meta,
        result_id=str(request.id or ""), worker=str(request.hostname or ""),
    )  # fmt: skip
