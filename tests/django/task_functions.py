"""``django.tasks`` tasks of the backend's tests, at module level as the API requires: each
leaves a file behind so a test in another process can see that it ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from parallel_scheduler.contrib.django.task_api import api_name

if api_name == "django.tasks":
    from django.tasks import task
else:
    from django_tasks import task


@task
def write_file(path: str, text: str) -> str:
    Path(path).write_text(text)
    return text


@task
def fail(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def write_context(context: Any, path: str) -> None:
    result = context.task_result
    Path(path).write_text(
        json.dumps({"id": result.id, "attempt": context.attempt, "args": result.args})
    )


#: Not a task: a worker must refuse to run it.
def plain_function(path: str) -> None:
    Path(path).write_text("ran")
