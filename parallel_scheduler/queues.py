"""Which queue a job will be sent to, as the side that stores it knows it: the one home for
``NewJob.queue``, by which a paused queue holds its jobs (``PauseStore``).

A job's queue is its ``queue`` send option when it names one (a name, a kombu ``Queue``, or one
serialised as a dict), else what a ``QueueRouter`` says: the Celery plugin passes its app's router
(``task_routes``, then ``task_default_queue``), since that is where the release will send it.
Without either, the queue is unknown (``None``) and only a pause of the job's task holds it. A
name longer than a pause may name (255 characters, as a task name) is stored as unknown too: no
pause could hold it, and storage keeps a queue in a column of that size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from storage_adapters.records import MAX_TASK_NAME_LENGTH, JobRecord

__all__ = ["QueueRouter", "options_queue", "payload_queue", "record_queue"]

#: The queue a call of ``task`` with ``(args, kwargs)`` is routed to when its options name none
#: (a Celery app's router), or ``None`` when it cannot tell.
QueueRouter = Callable[[str, Sequence[Any], Mapping[str, Any]], "str | None"]


def options_queue(options: Mapping[str, Any]) -> str | None:
    """The queue ``options`` name, or ``None``: validated options hold a name (the usual case,
    one dict read); a kombu ``Queue`` or a serialised one gives its ``name``."""
    queue = options.get("queue")
    if type(queue) is not str:
        if queue is None:
            return None
        queue = queue.get("name") if isinstance(queue, Mapping) else getattr(queue, "name", None)
    return _pausable(queue)


def _pausable(name: object) -> str | None:
    """``name`` if a pause could name it (1-255 characters), else ``None``."""
    return name if isinstance(name, str) and 0 < len(name) <= MAX_TASK_NAME_LENGTH else None


def payload_queue(task: str, payload: str, route: QueueRouter | None = None) -> str | None:
    """The queue of a stored call (a recurring job's payload, which each firing carries): its
    options' queue, else ``route``'s; ``None`` for a payload that does not decode (it fails
    alone at its release, not here)."""
    try:
        body = json.loads(payload)
        queue = options_queue(body.get("options") or {})
        args, kwargs = body.get("args") or (), body.get("kwargs") or {}
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None
    if queue is not None or route is None:
        return queue
    try:
        return _pausable(route(task, args, kwargs))
    except Exception:  # a router that fails here fails the release too, which reports it
        return None


def record_queue(record: JobRecord) -> str | None:
    """The queue of a stored job: the one stored with it, else the one its options name (a row
    stored before jobs kept their queue); ``None`` when neither says."""
    if isinstance(record.queue, str) and record.queue:
        return record.queue
    return payload_queue(record.task, record.payload)
