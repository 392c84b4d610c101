"""What only the AMQP fast path (``AmqpPublisher``) promises, against a real RabbitMQ and a real
``celery worker``: a real worker runs what it publishes, its connections and transactions (all or
nothing, reconnection, concurrency, confirms), what it leaves to ``send_task``, its configuration,
and the messages the broker will not take that ``send_task`` would lose (returned, nacked).

What every dispatcher promises (each job once, its routing, send_task's message, the expiry, what
is reported sent, a lost lease, a job that cannot be sent, among them one for a missing exchange)
is the dispatcher contract: ``tests/dispatch/contract``. Every test uses queues of its own and
deletes them afterwards; they are read with ``devtools.broker_messages.RabbitQueues``. Worker
executions are recorded in Redis by ``tests.celery_integration.e2e_celery_app``, as in the Redis
end-to-end tests.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
from celery import Celery
from kombu import Connection
from kombu import Exchange as KombuExchange
from kombu import Queue as KombuQueue

from devtools.broker_messages import RabbitQueues, job_ids
from devtools.processes import stop_process
from devtools.waiting import wait_until
from parallel_scheduler import CeleryDispatcher, DelayedJobScheduler, JobSpec, JobState, Settings
from parallel_scheduler.celery.integration import CeleryIntegration
from parallel_scheduler.celery.publish.amqp import AmqpPublisher
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.dispatchers import BatchDispatchError
from parallel_scheduler.errors import ConfigurationError, UnsendableJobError
from storage_adapters import ClaimedJob
from tests.celery_apps import worker_command
from tests.celery_integration.celery_cluster import Cluster
from tests.celery_integration.fast_path import own_queues, producer_app
from tests.conftest import RABBITMQ_URL, REDIS_URL, made_by, require_server, set_up_storage

ROOT = Path(__file__).resolve().parents[2]
TASK = "e2e.record"


@pytest.fixture
def broker() -> Iterator[RabbitQueues]:
    yield from own_queues(RabbitQueues, "ps-amqp")


def make_app(default_queue: str, **conf: Any) -> Celery:
    """The releasing side: a producer app like a user's, on the real RabbitMQ."""
    return producer_app("rabbitmq", "amqp-fast", default_queue, **conf)


def claims(specs: Sequence[JobSpec]) -> list[ClaimedJob]:
    now = time.time()
    return [
        ClaimedJob(job.id, job.task, job.payload, now, 1, 1)
        for job in (spec.encode(now) for spec in specs)
    ]


def jobs(queue: str, count: int, label: str, **options: Any) -> list[ClaimedJob]:
    return claims(
        [
            JobSpec(
                TASK,
                args=[i, "é"],
                kwargs={"n": i},
                options={"queue": queue, **options},
                id=f"{label}-{i}",
            )
            for i in range(count)
        ]
    )


class Worker:
    """A real ``celery worker`` (tests.celery_integration.e2e_celery_app) consuming given queues
    from RabbitMQ."""

    def __init__(self, tmp_path: Path, queues: Sequence[str]) -> None:
        run = uuid.uuid4().hex[:10]
        self.key = f"ps-amqp-e2e:{run}:executed"
        self.log = tmp_path / f"worker-{run}.log"
        self.records = redis.Redis.from_url(REDIS_URL)
        env = dict(
            os.environ,
            PS_E2E_BROKER_URL=RABBITMQ_URL,
            PS_E2E_RECORD_URL=REDIS_URL,
            PS_E2E_RECORD_KEY=self.key,
        )
        command = worker_command(
            "tests.celery_integration.e2e_celery_app", ",".join(queues), f"amqp-{run}",
            loglevel="WARNING",
        )  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_until(
            lambda: self.records.get(self.key + ":ready") or self.process.poll() is not None,
            timeout=60,
        )
        assert self.process.poll() is None, self.log.read_text()

    def executions(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.records.lrange(self.key, 0, -1)]

    def stop(self) -> None:
        stop_process(self.process, timeout=30)
        self.records.delete(self.key, self.key + ":ready")


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    require_server("redis")
    yield from made_by(lambda *queues: Worker(tmp_path, queues), Worker.stop)


@pytest.fixture
def publishers() -> Iterator[Callable[..., AmqpPublisher]]:
    yield from made_by(AmqpPublisher, AmqpPublisher.close)


class Lane(NamedTuple):
    """A queue of the test's own, a publisher whose app routes there by default, and the broker
    to look at it with."""

    queue: str
    publisher: AmqpPublisher
    broker: RabbitQueues


@pytest.fixture
def lane(broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]) -> Lane:
    queue = broker.queue()
    return Lane(queue, publishers(make_app(queue)), broker)


# -- a real worker executes what the fast path publishes -----------------------------------------


@pytest.mark.celery
@pytest.mark.rabbitmq
@pytest.mark.redis
def test_a_real_worker_runs_every_fast_path_message_once(
    start_worker: Callable[..., Worker], lane: Lane
) -> None:
    # Given 500 jobs released through the fast path in chunks of 100
    queue, publisher, broker = lane
    released = jobs(queue, 500, f"once-{broker.run}")
    for first in range(0, len(released), 100):
        publisher.dispatch_many(released[first : first + 100])
    # Then the broker holds each exactly once before any worker runs
    assert broker.count(queue) == 500
    # When a real, unchanged Celery worker consumes the queue
    worker = start_worker(queue)
    wait_until(lambda: len(worker.executions()) >= 500, timeout=90)
    wait_until(lambda: broker.count(queue) == 0, timeout=30)
    # Then every job ran exactly once, under its job id, with its arguments
    runs = worker.executions()
    assert Counter(run["id"] for run in runs) == Counter(job.id for job in released)
    for run in runs:
        assert run["args"] == [run["kwargs"]["n"], "é"]
        assert run["id"] == f"once-{broker.run}-{run['kwargs']['n']}"
        assert run["queue"] == queue
    assert "Traceback" not in worker.log.read_text()


@pytest.mark.celery
@pytest.mark.rabbitmq
@pytest.mark.redis
def test_routing_to_a_non_default_queue_keeps_priority(
    broker: RabbitQueues,
    start_worker: Callable[..., Worker],
    publishers: Callable[..., AmqpPublisher],
) -> None:
    # Given an app whose default queue is another one, and jobs routed elsewhere with
    # priorities, one of them by the queue's own exchange and routing key
    default, other = broker.queue("default"), broker.queue("other")
    publisher = publishers(make_app(default))
    released = claims(
        [
            JobSpec(TASK, args=[p], kwargs={"n": p}, id=f"prio-{broker.run}-{p}",
                    options={"queue": other, "priority": p})
            for p in (0, 4, 9)
        ]
        + [
            JobSpec(
                TASK, args=[7], kwargs={"n": 7},
                options={"queue": other, "exchange": other, "routing_key": other, "priority": 7},
                id=f"prio-{broker.run}-7",
            )
        ]
    )  # fmt: skip
    publisher.dispatch_many(released)
    assert broker.count(other) == 4
    assert broker.count(default) is None  # nothing went to (or declared) the default queue
    # When a real worker consumes the non-default queue
    worker = start_worker(other)
    wait_until(lambda: len(worker.executions()) >= 4, timeout=60)
    # Then each job ran once there, with the priority it was released with
    runs = {run["id"]: run for run in worker.executions()}
    assert sorted(runs) == sorted(job.id for job in released)
    for p in (0, 4, 9, 7):
        run = runs[f"prio-{broker.run}-{p}"]
        assert (run["priority"], run["queue"], run["args"]) == (p, other, [p])


@pytest.mark.celery
@pytest.mark.rabbitmq
@pytest.mark.redis
def test_an_expired_job_is_never_executed(start_worker: Callable[..., Worker], lane: Lane) -> None:
    # Given one chunk: a job that expired a second ago, then a job that expires in five minutes
    queue, publisher, broker = lane
    now = time.time()
    expired, live = claims(
        [
            JobSpec(
                TASK,
                args=[n],
                kwargs={"n": n},
                options={"queue": queue, "expires": at},
                id=f"{label}-{broker.run}",
            )
            for n, at, label in ((1, now - 1, "expired"), (2, now + 300, "live"))
        ]
    )
    publisher.dispatch_many([expired, live])
    # When a real worker consumes the queue
    worker = start_worker(queue)
    wait_until(lambda: any(run["id"] == live.id for run in worker.executions()), timeout=60)
    wait_until(lambda: broker.count(queue) == 0, timeout=30)
    # Then the live job ran and the expired one (ahead of it in the queue) never did
    assert [run["id"] for run in worker.executions()] == [live.id]


@pytest.mark.celery
@pytest.mark.rabbitmq
@pytest.mark.redis
def test_the_plugin_with_fast_publish_releases_through_the_amqp_path(tmp_path: Path) -> None:
    require_server("redis")
    require_server("rabbitmq")
    cluster = Cluster(RABBITMQ_URL, tmp_path)
    try:
        # Given a worker running the scheduler with fast_publish on a RabbitMQ broker
        cluster.env["PARALLEL_SCHEDULER_FAST_PUBLISH"] = "true"
        cluster.start_worker("--parallel-scheduler")
        cluster.wait_ready(1)
        # When far calls are made through plain apply_async
        record = cluster.producer().tasks["plugin.record"]
        results = [record.apply_async((i,), {"n": i}, countdown=1.5) for i in range(30)]
        # Then each runs once, released by the AMQP fast path
        wait_until(lambda: len(cluster.executions()) >= 30, timeout=60)
        assert Counter(e["id"] for e in cluster.executions()) == Counter(r.id for r in results)
        logs = "".join(path.read_text() for path in tmp_path.glob("*.log"))
        assert "fast publish: connected to the AMQP broker" in logs
    finally:
        cluster.close()
        with Connection(RABBITMQ_URL) as connection, connection.channel() as channel:
            channel.queue_delete(cluster.queue)


# -- all or nothing ------------------------------------------------------------------------------


@pytest.mark.rabbitmq
def test_a_connection_lost_before_the_commit_delivers_nothing(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]
) -> None:
    # Given a publisher with a connection open (warmed up on another queue)
    queue, warm = broker.queue(), broker.queue("warm")
    publisher = publishers(make_app(queue))
    publisher.dispatch_many(jobs(warm, 1, "warm"))
    (link,) = publisher._pool.idle

    # When the connection dies after the chunk's frames were written, before the commit
    def cut() -> bool:
        link.connection.transport.sock.shutdown(socket.SHUT_RDWR)
        return True

    chunk = jobs(queue, 200, "cut")
    with pytest.raises(BatchDispatchError) as raised:
        publisher.dispatch_many(chunk, cut)
    # Then nothing was sent, and the broker holds none of the chunk
    assert raised.value.sent == 0
    assert broker.count(queue) == 0
    # And the next call reconnects and sends the whole chunk, once
    publisher.dispatch_many(chunk)
    assert broker.count(queue) == 200


@pytest.mark.rabbitmq
def test_a_connection_closed_while_idle_is_replaced(lane: Lane) -> None:
    queue, publisher, broker = lane
    publisher.dispatch_many(jobs(queue, 1, "first"))
    (link,) = publisher._pool.idle
    link.connection.transport.sock.shutdown(socket.SHUT_RDWR)
    publisher.dispatch_many(jobs(queue, 10, "second"))
    assert broker.count(queue) == 11
    assert publisher._pool.idle and publisher._pool.idle[0] is not link


@pytest.mark.rabbitmq
def test_an_unreachable_broker_fails_the_chunk_without_showing_the_password() -> None:
    require_server("rabbitmq")
    app = Celery("unreachable", broker="amqp://guest:s3cr3t-pw@127.0.0.1:1//")
    app.conf.update(task_serializer="json", broker_connection_timeout=2)
    publisher = AmqpPublisher(app, timeout=2)
    with pytest.raises(BatchDispatchError) as raised:
        publisher.dispatch_many(jobs("nowhere", 3, "unreachable"))
    assert raised.value.sent == 0
    assert "s3cr3t-pw" not in str(raised.value)
    assert "127.0.0.1:1" in str(raised.value)


@pytest.mark.rabbitmq
def test_a_queue_deleted_after_its_declaration_is_declared_again(lane: Lane) -> None:
    # Given a publisher that declared its queue once, and the queue deleted behind its back
    queue, publisher, broker = lane
    publisher.dispatch_many(jobs(queue, 3, "before"))
    broker.delete(queue)
    # When it publishes to that queue again (mandatory: the broker returns what it cannot route)
    publisher.dispatch_many(jobs(queue, 20, "after"))
    # Then the queue is back with every message of the chunk, none lost
    assert broker.count(queue) == 20


@pytest.mark.rabbitmq
def test_concurrent_chunks_use_connections_of_their_own(lane: Lane) -> None:
    queue, publisher, broker = lane
    released = jobs(queue, 2000, "threads")
    chunks = [released[i : i + 100] for i in range(0, 2000, 100)]
    errors: list[BaseException] = []

    def send(mine: list[list[ClaimedJob]]) -> None:
        try:
            for chunk in mine:
                publisher.dispatch_many(chunk)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(chunks[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    ids = Counter(job_ids(broker.take(queue)))
    assert ids == Counter(job.id for job in released)


@pytest.mark.rabbitmq
def test_confirms_mode_publishes_durably_too(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]
) -> None:
    queue = broker.queue()
    publisher = publishers(make_app(queue), guarantee="confirms")
    for label in ("a", "b"):
        publisher.dispatch_many(jobs(queue, 300, label))
    assert broker.count(queue) == 600


# -- what the fast path leaves to send_task ------------------------------------------------------


@pytest.mark.rabbitmq
def test_a_non_json_serializer_goes_through_send_task(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]
) -> None:
    queue = broker.queue()
    app = make_app(queue, task_serializer="pickle", accept_content=["pickle", "json"])
    publishers(app).dispatch_many(jobs(queue, 3, "pickled"))
    messages = broker.take(queue)
    assert [m.content_type for m in messages] == ["application/x-python-serialize"] * 3


@pytest.mark.rabbitmq
def test_routes_of_their_own_go_fast_and_topic_queues_through_send_task(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]
) -> None:
    queue = broker.queue()
    publisher = publishers(make_app(queue))
    (job,) = jobs(queue, 1, "anonymous", exchange="", routing_key=queue)
    assert publisher._build(job) is not None  # the anonymous exchange reaches the queue
    (job,) = jobs(queue, 1, "elsewhere", exchange="amq.topic", routing_key="some.key")
    assert publisher._build(job) is not None  # published there, mandatory
    topic = KombuQueue(broker.queue("topic"), KombuExchange("amq.topic", type="topic"), "a.#")
    publisher = publishers(make_app(queue, task_queues=[topic]))
    (job,) = jobs(topic.name, 1, "topic")
    assert publisher._build(job) is None  # a queue on a topic exchange: send_task's business


# -- configuration -------------------------------------------------------------------------------


def test_a_non_amqp_broker_is_refused_with_the_url_masked() -> None:
    app = Celery("redis-broker", broker="redis://:hunter2@127.0.0.1:6379/0")
    with pytest.raises(ConfigurationError) as raised:
        AmqpPublisher(app)
    assert "RabbitMQ" in str(raised.value)
    assert "redis://:***@127.0.0.1:6379/0" in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_fast_publish_picks_the_publisher_for_the_broker(caplog: pytest.LogCaptureFixture) -> None:
    def dispatcher(url: str, **overrides: Any) -> Any:
        return CeleryIntegration(Celery("pick", broker=url), overrides).dispatcher()

    caplog.set_level(logging.INFO, logger="parallel_scheduler.celery.wiring")
    # fast_publish is on by default: the broker's one-round-trip publisher where it has one
    amqp = dispatcher("amqp://guest:guest@127.0.0.1:5672//")
    assert isinstance(amqp, AmqpPublisher)
    assert isinstance(dispatcher("pyamqp://guest:guest@127.0.0.1:5672//"), AmqpPublisher)
    assert isinstance(dispatcher("redis://127.0.0.1:6379/0"), RedisPublisher)
    assert isinstance(dispatcher("amqp://127.0.0.1//", fast_publish=False), CeleryDispatcher)
    assert not caplog.records  # nothing to say
    # and send_task for any other broker, said once at INFO with the password masked
    assert isinstance(dispatcher("sqs://key:topsecret@"), CeleryDispatcher)
    (said,) = caplog.records
    assert said.levelno == logging.INFO and "send_task" in said.getMessage()
    assert "sqs://key:***@" in said.getMessage() and "topsecret" not in said.getMessage()


@pytest.mark.rabbitmq
def test_a_large_header_that_fits_the_connections_frame_still_goes_fast(lane: Lane) -> None:
    queue, publisher, broker = lane
    (job,) = jobs(queue, 1, "large", headers={"x_note": "ü" * 20_000})
    publisher.dispatch(job)
    (message,) = broker.take(queue)
    assert message.headers["x_note"] == "ü" * 20_000
    assert message.properties["reply_to"] == ""  # the fast path's mark (send_task sets one)


def test_a_single_link_becomes_a_list_as_send_task_makes_it() -> None:
    # Given a stored call with one callback and one errback, as a signature dict each
    from parallel_scheduler.celery.publish.message_template import sample_message

    app = Celery("links", broker="memory://")
    link = {"task": "tasks.after", "args": [], "kwargs": {}, "options": {}, "subtask_type": None}
    options = {"link": link, "link_error": dict(link, task="tasks.failed")}
    # When the fast paths' template is built
    embed = sample_message(app, "tasks.t", options, "origin").body[2]
    # Then the worker gets lists to iterate, as from send_task
    assert [c["task"] for c in embed["callbacks"]] == ["tasks.after"]
    assert [e["task"] for e in embed["errbacks"]] == ["tasks.failed"]


# -- a message the broker will not take -----------------------------------------------------------


def ids_in(broker: RabbitQueues, queue: str) -> Counter[str]:
    return Counter(job_ids(broker.take(queue)))


@pytest.mark.rabbitmq
@pytest.mark.parametrize("guarantee", ["transaction", "confirms"])
def test_an_exchange_deleted_after_its_declaration_is_declared_again(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher], guarantee: str
) -> None:
    # Given a queue on an exchange of its own, declared by the publisher's first chunk
    queue, exchange = broker.queue(), f"ps-amqp-{broker.run}-own"
    app = make_app(queue, task_queues=[KombuQueue(queue, KombuExchange(exchange), queue)])
    publisher = publishers(app, guarantee=guarantee)
    route = {"exchange": exchange, "routing_key": queue}
    publisher.dispatch_many(jobs(queue, 2, "first", **route))
    # When the queue and its exchange are deleted behind its back
    broker.delete(queue)
    with broker.connection.channel() as channel:
        channel.exchange_delete(exchange)
    # Then the next chunk, published to that exchange, declares them again and gets through
    publisher.dispatch_many(jobs(queue, 10, "again", **route))
    assert set(ids_in(broker, queue)) == {f"again-{i}" for i in range(10)}


@pytest.mark.rabbitmq
@pytest.mark.parametrize("guarantee", ["transaction", "confirms"])
def test_a_message_no_queue_is_bound_for_is_unsendable_naming_its_route(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher], guarantee: str
) -> None:
    # Given a job for an exchange that exists, with a routing key no queue is bound to
    queue = broker.queue()
    publisher = publishers(make_app(queue), guarantee=guarantee)
    good = jobs(queue, 5, "good")
    (bad,) = jobs(queue, 1, "unroutable", exchange="amq.direct", routing_key="bound-to-nothing")
    # When it is published (mandatory) among good ones
    with pytest.raises(BatchDispatchError) as raised:
        publisher.dispatch_many([*good, bad])
    # Then the broker's return is seen, and said with the route
    assert raised.value.sent == len(good)
    cause = raised.value.cause
    assert isinstance(cause, UnsendableJobError) and cause.job_id == bad.id
    assert cause.reason == "no queue bound to route 'bound-to-nothing' on exchange 'amq.direct'"
    assert ids_in(broker, queue) == Counter(job.id for job in good)


@pytest.mark.rabbitmq
def test_a_message_the_broker_nacks_is_unsendable_after_the_ones_it_took(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher]
) -> None:
    # Given a queue that refuses what comes beyond its third message (confirms see the nack)
    queue = broker.queue()
    full = KombuQueue(queue, routing_key=queue)
    full.queue_arguments = {"x-max-length": 3, "x-overflow": "reject-publish"}
    publisher = publishers(make_app(queue, task_queues=[full]), guarantee="confirms")
    chunk = jobs(queue, 5, "overflow")
    # When five jobs are published there
    with pytest.raises(BatchDispatchError) as raised:
        publisher.dispatch_many(chunk)
    # Then the three taken count as sent, and the fourth is the one the broker refused
    assert raised.value.sent == 3
    cause = raised.value.cause
    assert isinstance(cause, UnsendableJobError) and cause.job_id == chunk[3].id
    assert cause.reason == "the broker refused the message (nack)"
    assert ids_in(broker, queue) == Counter(job.id for job in chunk[:3])


def release_around_one_refused(
    broker: RabbitQueues, publisher: AmqpPublisher, tmp_path: Path, queue: str, bad: dict[str, Any]
) -> tuple[list[str], str | None, JobState | None]:
    """One batch-mode scheduler pass over 21 due jobs on SQLite, the one with ``bad`` options
    due in the middle (one chunk): the ids that arrived in ``queue`` in order, and the bad
    job's ``last_error`` and state afterwards. Every good job is asserted Enqueued."""
    _, storage = set_up_storage(f"sqlite:///{tmp_path / 'store.db'}")
    now = storage.now()
    good = [
        JobSpec(TASK, args=[i], options={"queue": queue}, id=f"good-{i}", eta=now - 30 + i)
        for i in range(20)
    ]
    odd = JobSpec(
        TASK, options={"queue": queue, **bad}, id="bad", eta=now - 20.5
    )  # good-9 < it < good-10
    storage.add_jobs([spec.encode(now) for spec in [*good[:10], odd, *good[10:]]])
    scheduler = DelayedJobScheduler(storage, publisher, Settings(release_mode="batch"))
    try:
        stats = scheduler.run_once()
        arrived = job_ids(broker.take(queue))
        for spec in good:
            stored = storage.get_job(str(spec.id))
            assert stored is not None and stored.state is JobState.ENQUEUED, spec.id
        assert stats.released == len(good) and stats.backed_off == 1 and stats.failed == 0
        refused = storage.get_job("bad")
        return arrived, refused and refused.last_error, refused and refused.state
    finally:
        scheduler.close()
        storage.drop()
        storage.close()


@pytest.mark.rabbitmq
@pytest.mark.parametrize("guarantee", ["transaction", "confirms"])
def test_a_pass_sends_the_jobs_after_one_sent_back_twice_exactly_once(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher], tmp_path: Path, guarantee: str
) -> None:
    # Given a chunk with one job in its middle that no queue is bound for (sent back, declared
    # again and sent back again), while the broker takes the jobs after it
    queue = broker.queue()
    publisher = publishers(make_app(queue), guarantee=guarantee)
    # When a scheduler pass releases the chunk
    arrived, last_error, state = release_around_one_refused(
        broker, publisher, tmp_path, queue, {"exchange": "amq.direct", "routing_key": "nowhere"}
    )
    # Then every other job is in the queue exactly once (none sent again), and the bad one is
    # Scheduled again, saying why
    assert Counter(arrived) == Counter(f"good-{i}" for i in range(20))
    assert state is JobState.SCHEDULED and last_error is not None
    assert "no queue bound to route 'nowhere' on exchange 'amq.direct'" in last_error


@pytest.mark.rabbitmq
def test_a_pass_sends_the_jobs_after_a_nacked_one_exactly_once(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher], tmp_path: Path
) -> None:
    # Given a chunk with one job in its middle for a queue that refuses every message (the
    # broker nacks it under confirms) and acks the jobs after it, for a queue of their own
    queue, full = broker.queue(), broker.queue("full")
    refusing = KombuQueue(full, routing_key=full)
    refusing.queue_arguments = {"x-max-length": 0, "x-overflow": "reject-publish"}
    app = make_app(queue, task_queues=[KombuQueue(queue, routing_key=queue), refusing])
    publisher = publishers(app, guarantee="confirms")
    # When a scheduler pass releases the chunk
    arrived, last_error, state = release_around_one_refused(
        broker, publisher, tmp_path, queue, {"queue": full}
    )
    # Then every other job is in the queue exactly once, and the bad one is Scheduled again
    assert Counter(arrived) == Counter(f"good-{i}" for i in range(20))
    assert broker.count(full) == 0
    assert state is JobState.SCHEDULED and last_error is not None
    assert "the broker refused the message (nack)" in last_error


@pytest.mark.rabbitmq
@pytest.mark.parametrize(
    ("refusal", "guarantee"),
    [("nack", "confirms"), ("returned", "transaction"), ("returned", "confirms")],
)
def test_the_jobs_taken_after_a_refused_one_are_named_and_a_second_refused_one_is_not(
    broker: RabbitQueues, publishers: Callable[..., AmqpPublisher], refusal: str, guarantee: str
) -> None:
    # Given a chunk with two jobs the broker will not take (a queue refusing every message, or
    # a route no queue is bound to), each among good ones
    queue, full = broker.queue(), broker.queue("full")
    refusing = KombuQueue(full, routing_key=full)
    refusing.queue_arguments = {"x-max-length": 0, "x-overflow": "reject-publish"}
    app = make_app(queue, task_queues=[KombuQueue(queue, routing_key=queue), refusing])
    publisher = publishers(app, guarantee=guarantee)
    nack = refusal == "nack"
    to, route = (
        (full, {}) if nack else (queue, {"exchange": "amq.direct", "routing_key": "nowhere"})
    )
    first, middle, last = (jobs(queue, 5, label) for label in ("first", "middle", "last"))
    (bad1,), (bad2,) = jobs(to, 1, "bad1", **route), jobs(to, 1, "bad2", **route)
    # When it is published
    with pytest.raises(BatchDispatchError) as raised:
        publisher.dispatch_many([*first, bad1, *middle, bad2, *last])
    # Then the first bad one is named, with the good jobs after it the broker took: not the
    # second bad one, which the release sends again
    assert raised.value.sent == len(first)
    cause = raised.value.cause
    assert isinstance(cause, UnsendableJobError) and cause.job_id == bad1.id
    assert cause.taken_after == {job.id for job in [*middle, *last]}
    assert ids_in(broker, queue) == Counter(job.id for job in [*first, *middle, *last])
