"""RabbitMQ queues of the release-throughput scenario: how many messages a queue holds, and
every job id in it, consumed back (each must be there exactly once)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from kombu.connection import Connection

__all__ = ["delete_queue", "drain_ids", "queue_count"]


def _connect(broker_url: str) -> Any:
    return Connection(broker_url)  # type: ignore[no-untyped-call]


def queue_count(broker_url: str, queue: str) -> int:
    with _connect(broker_url) as connection, connection.channel() as channel:
        return int(channel.queue_declare(queue, passive=True).message_count)


def drain_ids(
    broker_url: str, queue: str, expected: int, timeout: float = 60.0
) -> tuple[int, Counter[str]]:
    """How many messages the queue held once ``expected`` arrived (or 30 s passed: send_task
    does not wait for the broker, so its last messages may still be on their way), and the
    job ids of all of them, consumed."""
    ids: Counter[str] = Counter()
    settle = time.monotonic() + 30
    while (held := queue_count(broker_url, queue)) < expected and time.monotonic() < settle:
        time.sleep(0.05)
    with _connect(broker_url) as connection:
        channel = connection.channel()
        held = int(channel.queue_declare(queue, passive=True).message_count)

        def take(message: Any) -> None:
            ids[message.properties["application_headers"]["id"]] += 1

        channel.basic_consume(queue, no_ack=True, callback=take)
        deadline = time.monotonic() + timeout
        while sum(ids.values()) < held and time.monotonic() < deadline:
            connection.drain_events(timeout=max(0.1, deadline - time.monotonic()))
        left = int(channel.queue_declare(queue, passive=True).message_count)
        if left:
            sys.exit(f"{left} message(s) still in {queue} after consuming {held}")
    return held, ids


def delete_queue(broker_url: str, queue: str) -> None:
    with _connect(broker_url) as connection, connection.channel() as channel:
        channel.queue_delete(queue)
