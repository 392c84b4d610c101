"""Where a Celery app routes a call whose options name no queue: its router (``task_routes``),
then ``task_default_queue``. The plugin stores that queue with each call it defers, and its
scheduler gives it to the firings of recurring jobs, so that a paused queue (``queues.py``) holds
the jobs the release would send to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parallel_scheduler.queues import QueueRouter

__all__ = ["queue_for", "router_of"]


def queue_for(
    app: Any, task: str, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None
) -> str:
    """The queue ``app`` sends a call of ``task`` to when its options name none."""
    route = app.amqp.router.route({}, task, args or (), kwargs or {})
    queue = route.get("queue")
    return str(getattr(queue, "name", queue) or app.conf.task_default_queue)


def router_of(app: Any) -> QueueRouter:
    """``queue_for`` bound to ``app``: the ``QueueRouter`` of its scheduler and client."""

    def route(task: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        return queue_for(app, task, args, kwargs)

    return route
