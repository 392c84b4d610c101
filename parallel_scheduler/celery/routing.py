"""Where a Celery app routes a call whose options name no queue: its router (``task_routes``),
then ``task_default_queue``. The plugin stores that queue with each call it defers, and its
scheduler gives it to the firings of recurring jobs, so that a paused queue (``queues.py``) holds
the jobs the release would send to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from celery.app.routes import MapRoute

from parallel_scheduler.queues import QueueRouter

__all__ = ["NAMES_KEPT", "queue_for", "router_of"]


def queue_for(
    app: Any, task: str, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None
) -> str:
    """The queue ``app`` sends a call of ``task`` to when its options name none."""
    route = app.amqp.router.route({}, task, args or (), kwargs or {})
    queue = route.get("queue")
    return str(getattr(queue, "name", queue) or app.conf.task_default_queue)


def router_of(app: Any) -> QueueRouter:
    """``queue_for`` bound to ``app``: the ``QueueRouter`` of its scheduler and client.

    When every route of ``task_routes`` is a mapping (a ``MapRoute``: names and patterns), the
    queue depends on the task's name alone and is remembered per name (``NAMES_KEPT`` at most):
    Celery's router costs tens of microseconds a call, which a burst of firings paid per job.
    A router function may read the arguments, so with one the router is asked every time."""
    by_name = _routes_by_name_only(app)
    known: dict[str, str] = {}

    def route(task: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        if not by_name:
            return queue_for(app, task, args, kwargs)
        queue = known.get(task)
        if queue is None:
            queue = queue_for(app, task, args, kwargs)
            if len(known) < NAMES_KEPT:
                known[task] = queue
        return queue

    return route


#: Task names whose queue ``router_of`` remembers; past that it asks the router each time.
NAMES_KEPT = 10_000


def _routes_by_name_only(app: Any) -> bool:
    """Whether every route of ``app``'s router (``task_routes``) is a mapping of names."""
    try:
        return all(isinstance(each, MapRoute) for each in app.amqp.router.routes)
    except Exception:  # a router that cannot be read is asked each time, and reports itself
        return False
