"""The Redis fast path (``RedisPublisher``) against a real Redis broker: each message is what
``send_task`` would push, and what the fast path cannot carry goes through ``send_task``.

Messages are read straight off the broker's lists: kombu's Redis transport keeps a queue as a list
(one per priority step) of JSON envelopes, so what is compared here is exactly what a worker pops.
A real worker running fast-published messages: ``test_celery_end_to_end.py`` (every job once,
priorities and headers kept) and ``test_celery_plugin.py`` (the plugin with ``fast_publish``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from parallel_scheduler import CeleryDispatcher, JobSpec
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from storage_adapters import ClaimedJob, NewJob
from tests.conftest import REDIS_URL, require_server

pytestmark = [pytest.mark.celery, pytest.mark.redis]
TASK = "redis_fast.record"  # its own name: another module shares a task "e2e.record" with every app
#: kombu's Redis transport: a queue's priority lists are ``<queue>\x06\x16<step>``
_PRIORITY_SEPARATOR = "\x06\x16"

Lists = dict[str, list[dict[str, Any]]]


class Broker:
    """Queue names of one test, their lists taken off the broker, and their deletion."""

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:10]
        self.client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
        self.queues: list[str] = []

    def queue(self) -> str:
        name = f"ps-redis-fast-{self.run}-{len(self.queues)}"
        self.queues.append(name)
        return name

    def _keys(self, queue: str) -> list[str]:
        return [queue, *(f"{queue}{_PRIORITY_SEPARATOR}{step}" for step in range(1, 10))]

    def take(self, queue: str) -> Lists:
        """Every message of ``queue``, by list key, removed from the broker."""
        taken: Lists = {}
        for key in self._keys(queue):
            raw = self.client.lrange(key, 0, -1)
            self.client.delete(key)
            if raw:
                taken[key] = [json.loads(message) for message in reversed(raw)]  # LPUSH order
        return taken

    def close(self) -> None:
        for queue in self.queues:
            self.client.delete(
                *self._keys(queue), f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"
            )
        self.client.close()


@pytest.fixture
def broker() -> Iterator[Broker]:
    require_server("redis")
    made = Broker()
    try:
        yield made
    finally:
        made.close()


def make_app(default_queue: str, **conf: Any) -> Celery:
    """The releasing side: a producer app like a user's, on the real Redis broker."""
    app = Celery(f"redis-fast-{uuid.uuid4().hex[:6]}", broker=REDIS_URL)
    app.conf.update({"task_serializer": "json", "task_default_queue": default_queue, **conf})
    return app


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


# -- what a worker receives is what send_task sends ---------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"priority": 5, "headers": {"x_tenant": "acme"}, "time_limit": 9, "soft_time_limit": 8},
        {
            "expires": time.time() + 3600,
            "ignore_result": True,
            "shadow": "shown-as",
            "link": {"task": "x.cb", "args": [], "kwargs": {}, "options": {}},
            "delivery_mode": "transient",
        },
    ],
    ids=["plain", "priority-headers-limits", "expires-link-shadow-transient"],
)
@pytest.mark.parametrize("built", ["at release", "at accept"])
def test_a_message_is_what_send_task_would_push(
    broker: Broker, options: dict[str, Any], built: str
) -> None:
    # Given one job, released once by send_task and once by the fast path (its message built
    # at release, or at accept time as an envelope the way Redis storage keeps it)
    queue = broker.queue()
    app = make_app(queue)
    spec = JobSpec(
        TASK, args=[1, "é"], kwargs={"n": 1}, options={"queue": queue, **options}, id="same-1"
    )
    CeleryDispatcher(app).dispatch_many([claimed(spec)])
    by_celery = broker.take(queue)
    publisher = RedisPublisher(app)
    job = claimed(spec)
    if built == "at accept":
        envelope = publisher.envelope(new_job(spec))
        if "expires" in options:  # an expiring job's message is built at release (its docstring)
            assert envelope is None
        else:
            assert envelope is not None
            job = ClaimedJob(job.id, job.task, job.payload, job.due_at, 1, 1, envelope)
    publisher.dispatch_many([job])
    by_fast_path = broker.take(queue)
    # Then it went onto the same list (the priority step's) ...
    assert list(by_fast_path) == list(by_celery)
    ((expected,),), ((got,),) = by_celery.values(), by_fast_path.values()
    expected_properties, got_properties = expected.pop("properties"), got.pop("properties")
    # ... with only what is per publish told apart: the delivery tag (kombu's key for the message
    # while a worker holds it unacknowledged: a fresh one per push, whoever pushes), and the
    # reply_to send_task fills with its producer thread's id for RPC results (no caller waits
    # on the result of a job released later; the fast path leaves it empty)
    assert expected_properties.pop("delivery_tag") != got_properties.pop("delivery_tag")
    assert got_properties.pop("reply_to") == ""
    expected_properties.pop("reply_to")
    if "expiration" in expected_properties:  # the TTL: milliseconds left, counted at each push
        left = int(expected_properties.pop("expiration")) - int(got_properties.pop("expiration"))
        assert abs(left) < 5000
    assert got_properties == expected_properties  # correlation id, delivery mode and info, ...
    assert got["headers"] == expected["headers"]  # task id, root id, reprs, limits, expires, ...
    # and the body: the same JSON value (kombu escapes non-ASCII text, the fast path writes it as
    # UTF-8, which its content encoding says; a worker decodes both to the same call)
    expected_body, got_body = expected.pop("body"), got.pop("body")
    assert json.loads(base64.b64decode(got_body)) == json.loads(base64.b64decode(expected_body))
    assert got == expected  # content type and encoding, and nothing else on either side
    assert got["content-type"] == "application/json" and got["content-encoding"] == "utf-8"


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
    broker: Broker, conf: dict[str, Any], options: dict[str, Any], task_options: dict[str, Any]
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
    (messages,) = broker.take(queue).values()
    reference = messages.pop()
    assert [m["headers"]["id"] for m in messages] == ["s-0", "s-1", "s-2"]
    assert all(m["properties"]["reply_to"] for m in messages)  # send_task's, not the fast path's
    for message in messages:
        assert message["content-type"] == reference["content-type"]
        assert message["headers"].get("compression") == reference["headers"].get("compression")
    serialized = conf.get("task_serializer") or options.get("serializer")
    serialized = serialized or task_options.get("serializer")
    if serialized == "pickle":
        assert reference["content-type"] == "application/x-python-serialize"
    else:
        assert reference["content-type"] == "application/json"
        assert reference["headers"]["compression"].startswith("application/x-")


def test_a_chunk_of_plain_json_jobs_still_goes_fast(broker: Broker) -> None:
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
    (messages,) = broker.take(queue).values()
    assert [m["headers"]["id"] for m in messages] == ["j-0", "j-1", "j-2"]
    assert [m["properties"]["reply_to"] for m in messages] == [""] * 3


# -- what opting out of the fast path keeps ------------------------------------------------------


def test_celerys_publish_signals_come_only_from_send_task(broker: Broker) -> None:
    # What fast_publish=False buys: Celery's before/after_task_publish signals, which the fast
    # path, pushing onto the broker's list itself, never sends
    from celery.signals import after_task_publish, before_task_publish

    queue = broker.queue()
    app = make_app(queue)
    seen: list[str] = []

    def before(headers: dict[str, Any], **_: Any) -> None:
        seen.append(f"before {headers['id']}")

    def after(headers: dict[str, Any], **_: Any) -> None:
        seen.append(f"after {headers['id']}")

    before_task_publish.connect(before, weak=False)
    after_task_publish.connect(after, weak=False)
    try:
        spec = JobSpec(TASK, options={"queue": queue})
        RedisPublisher(app).dispatch_many([claimed(dataclasses.replace(spec, id="fast"))])
        CeleryDispatcher(app).dispatch_many([claimed(dataclasses.replace(spec, id="slow"))])
    finally:
        before_task_publish.disconnect(before)
        after_task_publish.disconnect(after)
    assert seen == ["before slow", "after slow"]
    (messages,) = broker.take(queue).values()
    assert [m["headers"]["id"] for m in messages] == ["fast", "slow"]  # both were published
