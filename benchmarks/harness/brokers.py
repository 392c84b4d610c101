"""Broker queues a benchmark creates: how many messages wait, which job ids they carry, and
removing them (with kombu's bindings and parked unacknowledged messages) afterwards."""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import redis

__all__ = ["delete_celery_queue", "is_redis", "queue_length", "queued_ids"]


def is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "unix", "redis+socket")


def queue_length(broker_url: str, queue: str) -> int:
    """Messages ready in the broker queue; those a worker holds unacknowledged are not counted."""
    if is_redis(broker_url):
        return int(redis.Redis.from_url(broker_url).llen(queue))
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        return int(declared.message_count)


def queued_ids(broker: redis.Redis, queue: str) -> Counter[str]:
    """The Celery task ids of every message in a Redis broker's lists for ``queue``."""
    ids: Counter[str] = Counter()
    # SCAN may return a key more than once (while the keyspace rehashes): each list read once
    for key in set(broker.scan_iter(match=f"{queue}*")):
        for raw in broker.lrange(key, 0, -1):
            ids[json.loads(raw)["headers"]["id"]] += 1
    return ids


def delete_celery_queue(broker_url: str, queue: str) -> None:
    """Remove a Celery queue with its bindings and any of its messages kombu parked as unacked."""
    if is_redis(broker_url):
        client = redis.Redis.from_url(broker_url)
        client.delete(
            queue,
            *[f"{queue}\x06\x16{step}" for step in range(10)],
            f"_kombu.binding.{queue}",
            f"_kombu.binding_permanent.{queue}",
        )
        _drop_unacked(client, queue)
        return
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        channel = connection.default_channel
        channel.queue_delete(queue)
        channel.exchange_delete(queue)  # Celery's default exchange is named after the queue


def _drop_unacked(client: redis.Redis, queue: str) -> None:
    """kombu's Redis transport keeps unacknowledged messages of all queues in one shared hash,
    from which any consumer would later restore them: only this queue's entries are removed."""
    for tag, raw in client.hscan_iter("unacked"):
        with contextlib.suppress(ValueError, TypeError, IndexError):
            _, exchange, routing_key = json.loads(raw)
            if queue in (exchange, routing_key):
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
