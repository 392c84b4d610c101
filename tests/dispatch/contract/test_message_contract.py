"""What every dispatcher puts on the broker: one message per job, in order, with the job id as
task id and root id, the task name, the arguments, the queue (or exchange and routing key) the job
asked for, and otherwise exactly what Celery's own ``send_task`` would have sent for that call,
JSON only. Judged by reading the test's queues off the real broker."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest
from celery.signals import after_task_publish, before_task_publish

from devtools.broker_messages import RabbitQueues, job_ids
from parallel_scheduler import JobSpec
from tests.dispatch.contract.conftest import TASK, UnderTest, claims, jobs
from tests.dispatch.messages import CALL_OPTIONS, same_call


def test_a_batch_reaches_the_broker_once_per_job_in_order(under_test: UnderTest) -> None:
    # Given a batch of jobs for the app's default queue, with arguments and keyword arguments
    queue = under_test.queues.queue()
    batch = jobs(25, "batch")
    # When it is dispatched
    under_test.dispatcher(queue).dispatch_many(batch)
    # Then the queue holds one message per job, in the batch's order
    messages = under_test.queues.take(queue)
    assert job_ids(messages) == [job.id for job in batch]
    for i, message in enumerate(messages):
        # a protocol 2 task message for the job: its id as task id and root id
        assert message.headers["task"] == TASK
        assert message.headers["id"] == message.headers["root_id"] == f"batch-{i}"
        assert message.headers["parent_id"] is None
        assert message.properties["correlation_id"] == f"batch-{i}"
        # released when due: no eta for the worker to wait on, and no expiry unless asked
        assert message.headers["eta"] is None
        assert message.headers["expires"] is None
        assert "expiration" not in message.properties
        # its arguments as JSON, in a JSON body, and as the reprs Celery shows
        assert (message.content_type, message.content_encoding) == ("application/json", "utf-8")
        assert message.body[:2] == [[i, "é"], {"n": i}]
        assert (message.headers["argsrepr"], message.headers["kwargsrepr"]) == (
            repr([i, "é"]),
            repr({"n": i}),
        )
        # to the queue, by Celery's shortcut (the anonymous exchange, the queue's name as key)
        assert (message.exchange, message.routing_key) == ("", queue)
        assert message.properties["delivery_mode"] == 2  # persistent


def test_each_job_goes_to_the_queue_it_asked_for(under_test: UnderTest) -> None:
    # Given one batch mixing jobs for the app's default queue (named, or by asking none) and
    # jobs for two other queues
    default, other, third = (under_test.queues.queue(label) for label in ("dflt", "oth", "3rd"))
    batch = claims(
        [
            JobSpec(TASK, args=[i], id=f"mix-{i}", options=[{}, {"queue": default},
                    {"queue": other}, {"queue": third}][i % 4])
            for i in range(12)
        ]
    )  # fmt: skip
    # When it is dispatched
    under_test.dispatcher(default).dispatch_many(batch)
    # Then each queue holds exactly its jobs, in order, each routed by its queue's name
    by_queue = {queue: under_test.queues.take(queue) for queue in (default, other, third)}
    assert job_ids(by_queue[default]) == [f"mix-{i}" for i in range(12) if i % 4 in (0, 1)]
    assert job_ids(by_queue[other]) == [f"mix-{i}" for i in range(12) if i % 4 == 2]
    assert job_ids(by_queue[third]) == [f"mix-{i}" for i in range(12) if i % 4 == 3]
    for queue, messages in by_queue.items():
        assert {message.routing_key for message in messages} == {queue}


def test_the_priority_a_job_asked_for_travels_with_it(under_test: UnderTest) -> None:
    queue = under_test.queues.queue()
    batch = claims(
        [JobSpec(TASK, args=[p], options={"priority": p}, id=f"prio-{p}") for p in (0, 4, 9)]
    )
    under_test.dispatcher(queue).dispatch_many(batch)
    by_id = {message.job_id: message for message in under_test.queues.take(queue)}
    assert sorted(by_id) == ["prio-0", "prio-4", "prio-9"]
    for p in (0, 4, 9):
        assert by_id[f"prio-{p}"].properties["priority"] == p


def test_the_expiry_travels_as_celerys_header_and_message_ttl(under_test: UnderTest) -> None:
    # Given a job that expires in two minutes
    queue = under_test.queues.queue()
    expires = time.time() + 120
    (job,) = claims([JobSpec(TASK, args=[1], options={"expires": expires}, id="exp-1")])
    # When it is dispatched
    under_test.dispatcher(queue).dispatch_many([job])
    # Then its message carries Celery's ISO 8601 expires header, which a worker checks, and the
    # per-message TTL kombu sets from it (milliseconds left at publish), which the broker honours
    (message,) = under_test.queues.take(queue)
    assert message.headers["expires"] == datetime.fromtimestamp(expires, timezone.utc).isoformat()
    assert 110_000 <= int(message.properties["expiration"]) <= 120_000


# -- what a worker receives is what send_task sends ---------------------------------------------


@pytest.mark.parametrize("options", list(CALL_OPTIONS.values()), ids=list(CALL_OPTIONS))
def test_a_message_is_what_send_task_would_send(
    under_test: UnderTest, options: dict[str, Any]
) -> None:
    # Given a call published by Celery's own send_task, the way a user's code would make it
    queue = under_test.queues.queue()
    app = under_test.app(queue)
    call: dict[str, Any] = {"args": [1, "é"], "kwargs": {"n": 1}}
    as_celery = dict(options, queue=queue)
    if "expires" in options:  # Celery takes a datetime; the job model stores epoch seconds
        as_celery["expires"] = datetime.fromtimestamp(options["expires"], timezone.utc)
    app.send_task(TASK, task_id="by-celery", **call, **as_celery)
    (expected,) = under_test.queues.take(queue)
    # When the dispatcher releases a job of the same call
    (job,) = claims([JobSpec(TASK, **call, options={"queue": queue, **options}, id="by-job")])
    under_test.on(app).dispatch_many([job])
    (got,) = under_test.queues.take(queue)
    # Then its message is send_task's, but for what is per publish: its own id
    assert (got.headers["id"], got.headers["root_id"]) == ("by-job", "by-job")
    assert got.properties["correlation_id"] == "by-job"
    same_call(expected, got)


def test_a_route_to_another_exchange_reaches_the_queues_bound_there(
    on_rabbitmq: UnderTest,
) -> None:
    # Given a queue bound to amq.topic, and jobs routed there by exchange and routing key
    queues = on_rabbitmq.queues
    assert isinstance(queues, RabbitQueues)
    queue, bound = queues.queue(), queues.queue("bound")
    key = f"{queues.run}.jobs"
    with queues.connection.channel() as channel:
        channel.queue_declare(bound, durable=True, auto_delete=False)
        channel.queue_bind(bound, "amq.topic", key)
    routed = jobs(10, "topic", queue=queue, exchange="amq.topic", routing_key=key)
    # When they are dispatched, then they reach that queue, each once, by that route
    on_rabbitmq.dispatcher(queue).dispatch_many(routed)
    messages = queues.take(bound)
    assert job_ids(messages) == [job.id for job in routed]
    assert {(m.exchange, m.routing_key) for m in messages} == {("amq.topic", key)}


# -- Celery's publish signals --------------------------------------------------------------------


def test_celerys_publish_signals_come_only_from_send_task(under_test: UnderTest) -> None:
    # What fast_publish=False buys: Celery's before/after_task_publish signals, which a fast
    # path, writing the broker's messages itself, never sends (the module docstrings say so)
    queue = under_test.queues.queue()
    dispatcher = under_test.dispatcher(queue)
    seen: list[str] = []

    def before(headers: dict[str, Any], **_: Any) -> None:
        seen.append(f"before {headers['id']}")

    def after(headers: dict[str, Any], **_: Any) -> None:
        seen.append(f"after {headers['id']}")

    before_task_publish.connect(before, weak=False)
    after_task_publish.connect(after, weak=False)
    try:
        dispatcher.dispatch_many(jobs(2, "signals"))
    finally:
        before_task_publish.disconnect(before)
        after_task_publish.disconnect(after)
    assert job_ids(under_test.queues.take(queue)) == ["signals-0", "signals-1"]  # both went
    if under_test.kind.fast:
        assert seen == []
    else:
        assert seen == [f"{when} signals-{i}" for i in (0, 1) for when in ("before", "after")]
