"""The fast publish path to a Redis broker for fault scenarios, and the count of what it pushed.

Nothing consumes the broker's list in those scenarios, so every message a scheduler pushed is
still there to count: each carries its job id as the task id (``headers.id``).
"""

from __future__ import annotations

import json
from typing import Any

import redis
from celery import Celery

from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

QUEUE = "celery"  # Celery's default queue: the list the fast path pushes faults.record onto


def fault_app(broker_url: str) -> Any:
    app = Celery("faults", broker=broker_url)
    app.conf.update(task_serializer="json", accept_content=["json"], task_ignore_result=True)
    return app


def fast_publisher(broker_url: str) -> RedisPublisher:
    return RedisPublisher(fault_app(broker_url))


def pushed_ids(broker_url: str) -> list[str]:
    """The job id of every message on the broker's queue, duplicates included."""
    client = redis.Redis.from_url(broker_url)
    try:
        messages = client.lrange(QUEUE, 0, -1)
    finally:
        client.close()
    return [str(json.loads(message)["headers"]["id"]) for message in messages]


def pushed_count(broker_url: str) -> int:
    client = redis.Redis.from_url(broker_url)
    try:
        return int(client.llen(QUEUE))
    finally:
        client.close()
