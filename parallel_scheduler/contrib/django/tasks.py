"""The ``django.tasks`` backend, ``DurableBackend`` (``task_backend``), and the Celery task it
sends every call as (``task_runner``), in the module Celery's ``app.autodiscover_tasks()``
imports for this app: listing ``parallel_scheduler.contrib.django`` in ``INSTALLED_APPS`` is
all a worker needs to run these tasks.

In a project with neither ``django.tasks`` (Django 6.0+) nor the ``django-tasks`` backport, this
module imports (so autodiscovery does not break) and only naming the backend fails, saying what
to install.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DurableBackend", "django_task"]

try:
    from parallel_scheduler.contrib.django.task_backend import DurableBackend
    from parallel_scheduler.contrib.django.task_runner import django_task
except ImportError as _missing:  # task_api's TasksApiMissing: the only one not re-raised
    if type(_missing).__name__ != "TasksApiMissing":
        raise
    _why = str(_missing)

    def __getattr__(name: str) -> Any:
        if name in __all__:
            raise ImportError(_why)
        raise AttributeError(name)
