"""Celery's routing and options, translated once per task and option set for the AMQP fast path:
what ``send_task`` and ``send_task_message`` would do with them (the queue, exchange and routing
key, the message properties and headers), or ``None`` when the fast path cannot carry them and
``send_task`` decides instead."""

from __future__ import annotations

from typing import Any

import amqp  # type: ignore[import-untyped]
from kombu.common import Broadcast
from kombu.entity import Queue

from parallel_scheduler.celery.publish.amqp_frames import (
    PER_JOB_HEADERS,
    Template,
    matches_py_amqp,
    splice,
)
from parallel_scheduler.celery.publish.message_template import (
    delivery_mode,
    dumps,
    sample_message,
    send_task_options,
)

__all__ = ["make_template"]

#: What ``send_task_message`` consumes itself; anything else in a route becomes a message property.
_SENDER_KEYS = frozenset(
    {
        "queue", "exchange", "routing_key", "exchange_type", "delivery_mode", "serializer",
        "compression", "headers", "priority", "retry", "retry_policy", "timeout",
        "confirm_timeout", "event_dispatcher",
    }
)  # fmt: skip
_PROPERTY_NAMES = frozenset(name for name, _ in amqp.Message.PROPERTIES)
#: The options ``send_task`` hands its router (the rest go to the message builder).
_ROUTED = frozenset({"queue", "exchange", "routing_key", "priority", "headers", "delivery_mode"})


def make_template(app: Any, task: str, stored: dict[str, Any], origin: str) -> Template | None:
    """What ``send_task`` and ``send_task_message`` would do with these options, once."""
    options = send_task_options(app, task, stored)
    if options is None:
        return None
    routed = {k: v for k, v in options.items() if k in _ROUTED}
    route = app.amqp.router.route(routed, task, (), {})
    if (set(route) - _SENDER_KEYS) & _PROPERTY_NAMES:
        return None  # Celery would set other message properties from the route
    found = destination(app, route)
    if found is None:
        return None
    queue, exchange, routing_key = found
    sample = sample_message(app, task, options, origin)
    headers = dict(sample.headers)
    headers.update(route.get("headers") or {})
    for name in PER_JOB_HEADERS[:4]:
        headers.pop(name, None)
    values = {
        "content_type": "application/json",
        "content_encoding": "utf-8",
        "delivery_mode": delivery_mode(app, route, queue),
        "priority": route.get("priority", 0),  # kombu's default when the route has none
        "reply_to": sample.properties.get("reply_to"),
    }
    template = splice(queue, exchange, routing_key, values, headers, dumps(sample.body[2]))
    return template if matches_py_amqp(template, values, headers) else None


def destination(app: Any, route: dict[str, Any]) -> tuple[Any, str, str] | None:
    """``send_task_message``'s queue (the one it declares), exchange and routing key for a
    route, or ``None`` for a broadcast queue or one on a non-direct exchange (``send_task`` then
    decides). A route naming an exchange and routing key of its own is published there, as
    ``send_task`` would, but ``mandatory``: a message no queue is bound for, or for an exchange
    the broker does not have, is reported (``AmqpPublisher``) where Celery would lose it."""
    queue = route.get("queue")
    exchange = route.get("exchange")
    routing_key = route.get("routing_key")
    if queue is None and exchange is None:
        queue = app.amqp.default_queue
    if isinstance(queue, str):
        queue = app.amqp.queues[queue]
    if not isinstance(queue, Queue) or isinstance(queue, Broadcast):
        return None
    if (route.get("exchange_type") or getattr(queue.exchange, "type", "direct")) != "direct":
        return None
    exchange_name = getattr(exchange, "name", exchange)
    if not exchange_name or not routing_key:
        return queue, "", queue.name  # Celery's shortcut: the anonymous exchange
    return queue, str(exchange_name), str(routing_key)
