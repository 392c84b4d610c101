"""What reached a broker, for tests and benchmarks.

The fast publish path to a Redis broker for fault scenarios, and the count of what it pushed:
nothing consumes the broker's list in those scenarios, so every message a scheduler pushed is
still there to count; each carries its job id as the task id (``headers.id``).

``RedisQueues`` and ``RabbitQueues`` (``broker_queues``) read the messages of a test's own queues
off a real broker as ``BrokerMessage``: the same fields whichever broker held them, so one test
can judge every dispatcher (``tests/dispatch/contract``).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis
from amqp.exceptions import NotFound  # type: ignore[import-untyped]
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


# -- what reached a broker's queues, read the same way on Redis and on RabbitMQ -----------------

#: kombu's Redis transport keeps a queue as lists, one per priority step: ``<queue>\x06\x16<step>``
REDIS_PRIORITY_SEPARATOR = "\x06\x16"
#: The properties a transport sets for itself, not the producer: they say nothing of the job.
_TRANSPORT_PROPERTIES = ("delivery_info", "delivery_tag", "body_encoding", "application_headers")


@dataclass(frozen=True)
class BrokerMessage:
    """One task message as a worker would receive it, whichever broker held it.

    ``properties`` are the producer's message properties (correlation id, reply-to, delivery
    mode, priority, expiration, ...) without the headers, content type and encoding, which have
    fields of their own, and without what the transport adds itself (Redis: the delivery tag and
    info, the body encoding). ``lane`` is where it waited: the Redis list (a queue's priority step
    has a list of its own) or the RabbitMQ queue.
    """

    queue: str
    lane: str
    exchange: str
    routing_key: str
    content_type: str
    content_encoding: str
    headers: dict[str, Any]
    properties: dict[str, Any]
    #: The decoded JSON body, ``[args, kwargs, embed]`` (protocol 2); a body of another
    #: serializer, or compressed, as the broker holds it.
    body: Any
    delivery_tag: str

    @property
    def job_id(self) -> str:
        """The task id, which the scheduler's dispatchers set to the job id."""
        return str(self.headers["id"])


def job_ids(messages: Sequence[BrokerMessage]) -> list[str]:
    return [message.job_id for message in messages]


class BrokerQueues(Protocol):
    """Queue names of one test on a real broker, what reached them, and their deletion."""

    kind: str
    run: str

    def queue(self, label: str = "q") -> str:
        """A queue name no other test uses (deleted by ``close``)."""

    def take(self, queue: str) -> list[BrokerMessage]:
        """Every message waiting in ``queue``, oldest first (on Redis, lane by lane in the order
        a worker reads them), removed from the broker."""

    def count(self, queue: str) -> int | None:
        """Messages waiting in ``queue``; ``None`` where the broker says it does not exist."""

    def close(self) -> None:
        """Delete every queue ``queue`` named, and close the connection."""


class RedisQueues:
    """``BrokerQueues`` on a Redis broker: kombu's lists read straight off the server."""

    kind = "redis"

    def __init__(self, url: str, prefix: str = "ps-dispatch") -> None:
        self.run = uuid.uuid4().hex[:10]
        self.prefix = prefix
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.queues: list[str] = []

    def queue(self, label: str = "q") -> str:
        name = f"{self.prefix}-{self.run}-{label}-{len(self.queues)}"
        self.queues.append(name)
        return name

    @staticmethod
    def lanes(queue: str) -> list[str]:
        """The lists of ``queue``: its own, then one per priority step (1 to 9)."""
        return [queue, *(f"{queue}{REDIS_PRIORITY_SEPARATOR}{step}" for step in range(1, 10))]

    def take(self, queue: str) -> list[BrokerMessage]:
        taken: list[BrokerMessage] = []
        for lane in self.lanes(queue):
            raw = self.client.lrange(lane, 0, -1)
            self.client.delete(lane)
            # pushed on the left, popped by a worker from the right: the oldest is the last
            taken.extend(self._read(queue, lane, json.loads(text)) for text in reversed(raw))
        return taken

    def count(self, queue: str) -> int | None:
        return sum(int(self.client.llen(lane)) for lane in self.lanes(queue))

    @staticmethod
    def _read(queue: str, lane: str, envelope: dict[str, Any]) -> BrokerMessage:
        properties = dict(envelope["properties"])
        info = properties.get("delivery_info") or {}
        return BrokerMessage(
            queue=queue,
            lane=lane,
            exchange=str(info.get("exchange", "")),
            routing_key=str(info.get("routing_key", "")),
            content_type=envelope["content-type"],
            content_encoding=envelope["content-encoding"],
            headers=dict(envelope["headers"]),
            properties={k: v for k, v in properties.items() if k not in _TRANSPORT_PROPERTIES},
            body=_decoded(envelope["content-type"], envelope["headers"], _base64(envelope["body"])),
            delivery_tag=str(properties.get("delivery_tag", "")),
        )

    def close(self) -> None:
        for queue in self.queues:
            self.client.delete(
                *self.lanes(queue), f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"
            )
        self.client.close()


class RabbitQueues:
    """``BrokerQueues`` on RabbitMQ: messages taken with ``basic.get``, counts from a passive
    ``queue.declare``. ``connection`` is open for a test's own declarations and bindings."""

    kind = "rabbitmq"

    def __init__(self, url: str, prefix: str = "ps-dispatch") -> None:
        from kombu.connection import Connection

        self.run = uuid.uuid4().hex[:10]
        self.prefix = prefix
        self.connection: Any = Connection(url)  # type: ignore[no-untyped-call]
        self.queues: list[str] = []

    def queue(self, label: str = "q") -> str:
        name = f"{self.prefix}-{self.run}-{label}-{len(self.queues)}"
        self.queues.append(name)
        return name

    def take(self, queue: str) -> list[BrokerMessage]:
        """Every message in ``queue``, oldest first, removed from the broker; none when nobody
        declared the queue (nothing reached it)."""
        return [self._read(queue, message) for message in self.take_raw(queue)]

    def take_raw(self, queue: str) -> list[Any]:
        """Every message in ``queue`` as py-amqp has it, removed from the broker."""
        taken: list[Any] = []
        with self.connection.channel() as channel:
            try:
                while (message := channel.basic_get(queue, no_ack=True)) is not None:
                    taken.append(message)
            except NotFound:  # no such queue: the broker closed this channel, nothing was in it
                return []
        return taken

    def count(self, queue: str) -> int | None:
        with self.connection.channel() as channel:
            try:
                return int(channel.queue_declare(queue, passive=True).message_count)
            except NotFound:
                return None

    @staticmethod
    def _read(queue: str, message: Any) -> BrokerMessage:
        properties = dict(message.properties)
        content_type = str(properties.pop("content_type", ""))
        content_encoding = str(properties.pop("content_encoding", ""))
        headers = dict(properties.get("application_headers") or {})
        return BrokerMessage(
            queue=queue,
            lane=queue,
            exchange=str(message.delivery_info.get("exchange", "")),
            routing_key=str(message.delivery_info.get("routing_key", "")),
            content_type=content_type,
            content_encoding=content_encoding,
            headers=headers,
            properties={k: v for k, v in properties.items() if k not in _TRANSPORT_PROPERTIES},
            body=_decoded(content_type, headers, message.body),
            delivery_tag=str(message.delivery_info.get("delivery_tag", "")),
        )

    def delete(self, queue: str) -> None:
        with self.connection.channel() as channel:
            channel.queue_delete(queue)

    def close(self) -> None:
        for queue in self.queues:
            self.delete(queue)
        self.connection.release()


def _base64(text: str) -> bytes:
    return base64.b64decode(text)


def _decoded(content_type: Any, headers: dict[str, Any], body: Any) -> Any:
    """A JSON body as its value; any other (another serializer, or compressed) as it came."""
    if content_type != "application/json" or headers.get("compression"):
        return body
    return json.loads(body)


def broker_queues(kind: str, url: str, prefix: str = "ps-dispatch") -> BrokerQueues:
    """``RedisQueues`` or ``RabbitQueues`` for a broker ``kind`` (``redis`` or ``rabbitmq``)."""
    if kind == "redis":
        return RedisQueues(url, prefix)
    if kind == "rabbitmq":
        return RabbitQueues(url, prefix)
    raise ValueError(f"unknown broker kind {kind!r}")
