"""What the fast-path publisher tests (``test_amqp_publisher.py``, ``test_redis_publisher.py``)
share: a test's own queues on a real broker, and the releasing side, a producer app like a
user's on that broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

from celery import Celery

from devtools.broker_messages import RabbitQueues, RedisQueues
from tests.conftest import RABBITMQ_URL, REDIS_URL, require_server

#: The real broker of each kind of ``BrokerQueues``.
BROKER_URLS = {"redis": REDIS_URL, "rabbitmq": RABBITMQ_URL}
Queues = TypeVar("Queues", RedisQueues, RabbitQueues)


def own_queues(queues: type[Queues], prefix: str) -> Iterator[Queues]:
    """Queues named ``<prefix>-...`` on the real broker (its server required), every one of
    them deleted afterwards: a fixture's body (``yield from``)."""
    require_server(queues.kind)
    made = queues(BROKER_URLS[queues.kind], prefix)
    try:
        yield made
    finally:
        made.close()


def producer_app(kind: str, name: str, default_queue: str, **conf: Any) -> Celery:
    """The releasing side: a JSON producer app named ``<name>-<random>`` on the real ``kind``
    broker, sending to ``default_queue`` unless told otherwise; ``conf`` on top."""
    app = Celery(f"{name}-{uuid.uuid4().hex[:6]}", broker=BROKER_URLS[kind])
    app.conf.update({"task_serializer": "json", "task_default_queue": default_queue, **conf})
    return app
