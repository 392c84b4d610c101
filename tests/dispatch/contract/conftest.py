"""The dispatcher contract suite runs on every way the scheduler hands a job to Celery
(``DISPATCHERS``): ``send_task`` on each real broker, the Redis fast path on Redis, the AMQP fast
path on RabbitMQ under each of its guarantees. One contract, one suite, every dispatcher.

A test takes ``under_test``: the dispatcher's kind, its broker's queues of this test
(``devtools.broker_messages``: what reached them, read the same way on either broker), and a
factory of dispatchers on apps like a user's, each closed when the test ends. A case that only
one broker can pose (an exchange RabbitMQ does not have) takes ``on_rabbitmq``: the same, for
the dispatchers on RabbitMQ only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from celery import Celery

from devtools.broker_messages import BrokerQueues, broker_queues
from parallel_scheduler import CeleryDispatcher, JobSpec
from parallel_scheduler.celery.publish.amqp import AmqpPublisher
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.dispatchers import Dispatcher
from storage_adapters import ClaimedJob
from tests.conftest import RABBITMQ_URL, REDIS_URL, require_server

#: A task name of this suite's own; nothing runs it (the messages are read off the broker).
TASK = "dispatch_contract.record"


def _send_task(app: Celery) -> Dispatcher:
    return CeleryDispatcher(app)


def _redis_publisher(app: Celery) -> Dispatcher:
    return RedisPublisher(app)


def _amqp_transaction(app: Celery) -> Dispatcher:
    return AmqpPublisher(app, guarantee="transaction")


def _amqp_confirms(app: Celery) -> Dispatcher:
    return AmqpPublisher(app, guarantee="confirms")


@dataclass(frozen=True)
class Kind:
    """One dispatcher of the contract: its id, its broker, and how it is built from an app."""

    id: str
    broker: str  # "redis" or "rabbitmq"
    build: Callable[[Celery], Dispatcher]
    #: Sends a chunk in one round trip, built by itself (no Celery publish signals).
    fast: bool
    #: After the broker closed its channel for one message, jobs published before it may be
    #: sent again (the AMQP confirms mode does not know which of them the broker kept).
    may_repeat_after_a_closed_channel: bool = False


DISPATCHERS = [
    Kind("send_task@redis", "redis", _send_task, fast=False),
    Kind("send_task@rabbitmq", "rabbitmq", _send_task, fast=False),
    Kind("redis_publisher", "redis", _redis_publisher, fast=True),
    Kind("amqp_publisher[transaction]", "rabbitmq", _amqp_transaction, fast=True),
    Kind(
        "amqp_publisher[confirms]",
        "rabbitmq",
        _amqp_confirms,
        fast=True,
        may_repeat_after_a_closed_channel=True,
    ),
]

_URLS = {"redis": REDIS_URL, "rabbitmq": RABBITMQ_URL}


@dataclass
class UnderTest:
    """A dispatcher kind on its real broker, for one test: ``queues`` reads what reached the
    test's own queues; ``dispatcher`` builds one on a fresh app whose default queue is given."""

    kind: Kind
    queues: BrokerQueues
    made: list[Dispatcher] = field(default_factory=list)

    @property
    def url(self) -> str:
        return _URLS[self.kind.broker]

    def app(self, default_queue: str, **conf: Any) -> Celery:
        """A releasing app like a user's (JSON only) on the real broker."""
        app = Celery(f"dispatch-contract-{uuid.uuid4().hex[:6]}", broker=self.url)
        app.conf.update(
            {
                "task_serializer": "json",
                "accept_content": ["json"],
                "task_default_queue": default_queue,
                **conf,
            }
        )
        return app

    def dispatcher(self, default_queue: str, **conf: Any) -> Dispatcher:
        return self.on(self.app(default_queue, **conf))

    def on(self, app: Celery) -> Dispatcher:
        made = self.kind.build(app)
        self.made.append(made)
        return made

    def close(self) -> None:
        for made in self.made:
            close = getattr(made, "close", None)
            if close is not None:
                close()
        self.queues.close()


def _params(kinds: list[Kind]) -> list[Any]:
    return [pytest.param(k, id=k.id, marks=getattr(pytest.mark, k.broker)) for k in kinds]


def _running(kind: Kind) -> Iterator[UnderTest]:
    require_server(kind.broker)
    made = UnderTest(kind, broker_queues(kind.broker, _URLS[kind.broker], "ps-dispatch"))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(params=_params(DISPATCHERS))
def under_test(request: pytest.FixtureRequest) -> Iterator[UnderTest]:
    yield from _running(request.param)


@pytest.fixture(params=_params([kind for kind in DISPATCHERS if kind.broker == "rabbitmq"]))
def on_rabbitmq(request: pytest.FixtureRequest) -> Iterator[UnderTest]:
    """``under_test`` for the dispatchers on RabbitMQ, for a case only it poses (its exchanges
    and bindings); the Redis transport keeps a queue as a list, with no exchange to miss."""
    yield from _running(request.param)


def claims(specs: Sequence[JobSpec]) -> list[ClaimedJob]:
    """``specs`` encoded as now and claimed, as a scheduler pass hands them to its dispatcher."""
    now = time.time()
    return [
        ClaimedJob(job.id, job.task, job.payload, now, 1, 1)
        for job in (spec.encode(now) for spec in specs)
    ]


def jobs(count: int, label: str, **options: Any) -> list[ClaimedJob]:
    """``count`` claimed jobs ``<label>-0``, ... with arguments of their own and ``options``."""
    return claims(
        [
            JobSpec(TASK, args=[i, "é"], kwargs={"n": i}, options=options, id=f"{label}-{i}")
            for i in range(count)
        ]
    )
