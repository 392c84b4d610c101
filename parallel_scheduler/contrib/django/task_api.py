"""The ``django.tasks`` API the backend speaks, from Django 6's ``django.tasks`` when present,
else from the ``django-tasks`` backport (``django_tasks``, for Django 4.2 and 5.x).

The two differ in a few names (``InvalidTask`` in Django 6, ``InvalidTaskError`` in the backport)
and in ``TaskResult``'s fields as releases go by; this module names each piece once, so the
backend and the worker side never test for a version themselves.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any

from parallel_scheduler.errors import MissingExtraError

__all__ = [
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TasksApiMissing",
    "api_name",
    "make_result",
    "status",
    "task_backends",
]


class TasksApiMissing(MissingExtraError):
    """Neither ``django.tasks`` (Django 6.0 or later) nor the backport is installed."""


def _api() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(package, module of Task and TaskResult, exceptions module)`` of the API installed."""
    for package in ("django.tasks", "django_tasks"):
        try:
            root = importlib.import_module(package)
        except ImportError:
            continue
        for name in ("base", "task"):  # where Task and TaskResult live (6.0 and the backport)
            try:
                found = importlib.import_module(f"{package}.{name}")
            except ImportError:
                continue
            if hasattr(found, "TaskResult"):
                return root, found, importlib.import_module(f"{package}.exceptions")
    raise TasksApiMissing(
        "parallel_scheduler.contrib.django.tasks needs django.tasks (Django 6.0 or later) or "
        "the django-tasks backport: pip install django-tasks"
    )


_root, _base, _exceptions = _api()
_backends_base = importlib.import_module(f"{_root.__name__}.backends.base")

#: ``"django.tasks"`` or ``"django_tasks"``: which API this process uses.
api_name: str = _root.__name__
BaseTaskBackend: Any = _backends_base.BaseTaskBackend
Task: Any = _base.Task
TaskResult: Any = _base.TaskResult
TaskError: Any = _base.TaskError
TaskContext: Any = _base.TaskContext
#: The project's backends by alias (``TASKS``).
task_backends: Any = getattr(_root, "task_backends", None) or _root.tasks
_Status: Any = getattr(_base, "TaskResultStatus", None) or _base.ResultStatus
InvalidTask: type[Exception] = (
    getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
)
TaskResultDoesNotExist: type[Exception] = (
    getattr(_exceptions, "TaskResultDoesNotExist", None) or _exceptions.ResultDoesNotExist
)


def _member(*names: str) -> Any:
    for name in names:
        if hasattr(_Status, name):
            return getattr(_Status, name)
    raise ImportError(f"{api_name} has no result status named {' or '.join(names)}")


#: The result statuses by one name each, whatever this version calls them.
status: dict[str, Any] = {
    "ready": _member("READY", "NEW"),
    "running": _member("RUNNING"),
    "failed": _member("FAILED"),
    "successful": _member("SUCCESSFUL", "SUCCEEDED", "COMPLETE"),
}

_RESULT_FIELDS = frozenset(f.name for f in dataclasses.fields(TaskResult) if f.init)


def make_result(return_value: Any = None, **fields: Any) -> Any:
    """A ``TaskResult`` of the fields this version has (the others dropped), with its return
    value set the way the API's own backends set it."""
    result = TaskResult(**{k: v for k, v in fields.items() if k in _RESULT_FIELDS})
    if return_value is not None:
        object.__setattr__(result, "_return_value", return_value)
    return result
