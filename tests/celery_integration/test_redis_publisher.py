"""What only the Redis fast path (``RedisPublisher``) promises, against a real Redis broker: a
message built at accept time (an envelope) is what ``send_task`` would push, each push has its
own delivery tag, and what the fast path cannot carry goes through ``send_task``.

What every dispatcher promises (each job once, its routing, send_task's message when built at
release, what is reported sent, a job that cannot be sent, Celery's publish signals) is the
dispatcher contract: ``tests/dispatch/contract``. Messages are read straight off the broker's
lists (``devtools.broker_messages.RedisQueues``): kombu's Redis transport keeps a queue as a list
(one per priority step) of JSON envelopes, so what is compared here is exactly what a worker pops.
A real worker running fast-published messages: ``test_celery_end_to_end.py`` (every job once,
priorities and headers kept) and ``test_celery_plugin.py`` (the plugin with ``fast_publish``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from devtools.broker_messages import RedisQueues, job_ids
from parallel_scheduler import CeleryDispatcher, JobSpec
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from storage_adapters import ClaimedJob, NewJob
from tests.celery_integration.fast_path import own_queues, producer_app
from tests.dispatch.messages import CALL_OPTIONS, same_call

pytestmark = [pytest.mark.celery, pytest.mark.redis]
TASK = "redis_fast.record"  # its own name: another module shares a task "e2e.record" with every app


@pytest.fixture
def broker() -> Iterator[RedisQueues]:
    yield from own_queues(RedisQueues, "ps-redis-fast")


def make_app(default_queue: str, **conf: Any) -> Celery:
    """The releasing side: a producer app like a user's, on the real Redis broker."""
    return producer_app("redis", "redis-fast", default_queue, **conf)


def registered(app: Celery, **task_options: Any) -> None:
    """Register ``TASK`` with ``task_options`` and finalize ``app``: ``send_task`` (and so the
    fast path) applies a task's own options only once it is in the app's registry."""

    def record(*args: Any, **kwargs: Any) -> None:
        """Never run here: the messages are read off the broker, not consumed."""

    app.task(name=TASK, shared=False, **task_options)(record)  # this app's alone
    app.finalize()


def claimed(spec: JobSpec) -> ClaimedJob:
    now = time.time()
    job = spec.encode(now)
    return ClaimedJob(job.id, job.task, job.payload, now, 1, 1)


def new_job(spec: JobSpec) -> NewJob:
    return spec.encode(time.time())


# -- a message built at accept time is what send_task would push -------------------------------


@pytest.mark.parametrize("options", list(CALL_OPTIONS.values()), ids=list(CALL_OPTIONS))
def test_a_message_built_at_accept_is_what_send_task_would_push(
    broker: RedisQueues, options: dict[str, Any]
) -> None:
    # Given one call released by send_task, and the same call's envelope, built by the fast path
    # as the job was accepted (the way Redis storage keeps it)
    queue = broker.queue()
    app = make_app(queue)
    call: dict[str, Any] = {"args": [1, "é"], "kwargs": {"n": 1}}
    spec = JobSpec(TASK, **call, options={"queue": queue, **options}, id="by-envelope")
    CeleryDispatcher(app).dispatch_many([claimed(dataclasses.replace(spec, id="by-celery"))])
    (expected,) = broker.take(queue)
    publisher = RedisPublisher(app)
    envelope = publisher.envelope(new_job(spec))
    if "expires" in options:  # an expiring job's message is built at release (its docstring)
        assert envelope is None
        return
    assert envelope is not None
    # When the job is released with it
    job = claimed(spec)
    publisher.dispatch_many([ClaimedJob(job.id, job.task, job.payload, job.due_at, 1, 1, envelope)])
    (got,) = broker.take(queue)
    # Then the message pushed is send_task's, but for what is per publish: its own id
    assert (got.headers["id"], got.headers["root_id"]) == ("by-envelope", "by-envelope")
    assert got.properties["correlation_id"] == "by-envelope"
    same_call(expected, got)


@pytest.mark.parametrize("built", ["at release", "at accept"])
def test_a_push_has_a_delivery_tag_of_its_own_and_no_reply_to(
    broker: RedisQueues, built: str
) -> None:
    # Given a job pushed by send_task, then twice by the fast path (its message built at
    # release, or at accept as an envelope)
    queue = broker.queue()
    app = make_app(queue)
    publisher = RedisPublisher(app)
    spec = JobSpec(TASK, args=[1], options={"queue": queue}, id="thrice")
    job = claimed(spec)
    if built == "at accept":
        envelope = publisher.envelope(new_job(spec))
        assert envelope is not None
        job = ClaimedJob(job.id, job.task, job.payload, job.due_at, 1, 1, envelope)
    CeleryDispatcher(app).dispatch_many([job])
    publisher.dispatch_many([job])
    publisher.dispatch_many([job])
    by_celery, *by_fast_path = broker.take(queue)
    # Then the fast path's messages have delivery tags of their own (kombu's key for a message
    # while a worker holds it unacknowledged), a fresh one per push when built at release ...
    tags = [message.delivery_tag for message in by_fast_path]
    assert all(tags) and by_celery.delivery_tag not in tags
    if built == "at release":
        assert tags[0] != tags[1]
    # ... and an empty reply_to, where send_task names its producer thread for RPC results (no
    # caller waits on the result of a job released later): the fast path's mark
    assert [message.properties["reply_to"] for message in by_fast_path] == ["", ""]
    assert by_celery.properties["reply_to"]


# -- what the fast path leaves to send_task ------------------------------------------------------


@pytest.mark.parametrize(
    ("conf", "options", "task_options"),
    [
        ({"task_serializer": "pickle", "accept_content": ["pickle", "json"]}, {}, {}),
        ({"task_compression": "zlib"}, {}, {}),
        ({}, {"serializer": "pickle"}, {}),
        ({}, {"compression": "gzip"}, {}),
        ({}, {}, {"serializer": "pickle"}),
        ({}, {}, {"compression": "bzip2"}),
    ],
    ids=[
        "app-serializer",
        "app-compression",
        "call-serializer",
        "call-compression",
        "task-serializer",
        "task-compression",
    ],
)
def test_a_serializer_or_compression_goes_through_send_task(
    broker: RedisQueues,
    conf: dict[str, Any],
    options: dict[str, Any],
    task_options: dict[str, Any],
) -> None:
    # Given a chunk whose body send_task would encode otherwise than as plain JSON: by the app's
    # configuration, the call's own options, or the registered task's
    queue = broker.queue()
    app = make_app(queue, **conf)
    registered(app, **task_options)
    publisher = RedisPublisher(app)
    specs = [
        JobSpec(TASK, args=[i], kwargs={"n": i}, options={"queue": queue, **options}, id=f"s-{i}")
        for i in range(3)
    ]
    # Then no message is built for it at accept time
    assert [publisher.envelope(new_job(spec)) for spec in specs] == [None] * 3
    # and when released the chunk goes through send_task whole, in order: what Celery encodes
    publisher.dispatch_many([claimed(spec) for spec in specs])
    CeleryDispatcher(app).dispatch_many([claimed(specs[0])])
    messages = broker.take(queue)
    reference = messages.pop()
    assert job_ids(messages) == ["s-0", "s-1", "s-2"]
    assert all(m.properties["reply_to"] for m in messages)  # send_task's, not the fast path's
    for message in messages:
        assert message.content_type == reference.content_type
        assert message.headers.get("compression") == reference.headers.get("compression")
    serialized = conf.get("task_serializer") or options.get("serializer")
    serialized = serialized or task_options.get("serializer")
    if serialized == "pickle":
        assert reference.content_type == "application/x-python-serialize"
    else:
        assert reference.content_type == "application/json"
        assert reference.headers["compression"].startswith("application/x-")


def test_a_chunk_of_plain_json_jobs_still_goes_fast(broker: RedisQueues) -> None:
    # The other side of the test above, so that it can fail: the same chunk without a serializer
    # or compression is pushed by the fast path (its mark: an empty reply_to; send_task's names
    # its producer thread)
    queue = broker.queue()
    app = make_app(queue)
    registered(app)
    publisher = RedisPublisher(app)
    specs = [JobSpec(TASK, args=[i], options={"queue": queue}, id=f"j-{i}") for i in range(3)]
    assert all(publisher.envelope(new_job(spec)) is not None for spec in specs)
    publisher.dispatch_many([claimed(spec) for spec in specs])
    messages = broker.take(queue)
    assert job_ids(messages) == ["j-0", "j-1", "j-2"]
    assert [m.properties["reply_to"] for m in messages] == [""] * 3
