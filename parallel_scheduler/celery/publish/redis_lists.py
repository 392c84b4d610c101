"""The fast path to a Redis broker: a whole chunk of due jobs in one round trip.

Celery's publish path costs CPU per message and does not scale with threads (the figures are in
docs/explanation/performance-results.md), so a scheduler that calls ``send_task`` per job is bounded
by it. This dispatcher builds each message with Celery's own ``app.amqp.as_task_v2`` (the same
headers, body and properties a worker expects), wraps it the way kombu's Redis transport does, and
pushes the chunk with one ``MULTI``/``LPUSH``/``EXEC``: all of it or none of it.

It serves what the Redis transport would deliver straight to a list: queues on direct exchanges
(Celery's default, and what ``task_routes`` to a queue name produce), JSON bodies without
compression. Anything else (fanout or topic exchanges; a serializer other than JSON or a
compression, whether the app's, the registered task's or the call's own) goes through
``send_task`` as usual. Celery's ``before_task_publish``/``after_task_publish`` signals are not
sent for fast-path messages.
"""

from __future__ import annotations

import binascii
import bisect
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from parallel_scheduler.celery.publish.message_template import (
    RELEASE_HEADER,
    carries_own_identity,
    delivery_mode,
    due_header,
    expiration,
    expires_header,
    options_key,
    origin,
    quoted,
    sample_message,
    send_task_options,
)
from parallel_scheduler.celery.publish.message_template import dumps as _dumps
from parallel_scheduler.celery.publish.message_template import short_repr as _short_repr
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.delayed.envelopes import (
    ReleaseFacts,
    decode_envelope,
    encode_envelope,
    release_facts,
)
from parallel_scheduler.dispatchers import (
    BatchDispatchError,
    KeepGoing,
    always,
    built_for_send,
    lease_lost,
)
from parallel_scheduler.errors import ConfigurationError
from storage_adapters import ClaimedJob, NewJob

__all__ = ["RedisPublisher"]


_PER_JOB_HEADERS = ("id", "root_id", "argsrepr", "kwargsrepr", RELEASE_HEADER)
_PER_JOB_PROPERTIES = ("correlation_id", "delivery_tag", "expiration")


@dataclass(frozen=True)
class _Template:
    """A message's constant parts as JSON text, inner members only (no braces), ready to splice."""

    key: str
    headers_json: str
    properties_json: str
    embed_json: str


def _members(mapping: dict[str, Any], leave_out: tuple[str, ...]) -> str:
    return _dumps({k: v for k, v in mapping.items() if k not in leave_out})[1:-1]


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_DEFAULT_PRIORITY_STEPS = (0, 3, 6, 9)
_MAX_PRIORITY = 9  # kombu's virtual channel: a message priority is held to 0..9
_SEPARATOR = "\x06\x16"


def _direct(queue: Any) -> bool:
    """Whether the Redis transport delivers to ``queue``'s list as is (a direct exchange)."""
    return getattr(queue.exchange, "type", "direct") == "direct"


class RedisPublisher:
    """A ``Dispatcher`` for apps whose broker is Redis."""

    publishes_chunks = True  # one MULTI/LPUSH per chunk (see ``dispatchers.metrics_label``)

    def __init__(self, app: Any) -> None:
        url = str(app.conf.broker_url or "")
        if not url.startswith(_REDIS_SCHEMES):
            raise ConfigurationError("the fast publish path needs a Redis broker (redis://…)")
        self.app = app
        self._fallback = CeleryDispatcher(app)
        self._redis = redis.Redis.from_url(url)
        options = app.conf.broker_transport_options or {}
        self._steps = tuple(sorted(options.get("priority_steps", _DEFAULT_PRIORITY_STEPS)))
        self._separator = options.get("sep", _SEPARATOR)
        self._origin = origin()
        # compression or another serializer changes the body: send_task encodes those messages
        self._json = app.conf.task_serializer == "json" and not app.conf.task_compression
        self._templates: dict[tuple[str, str], _Template | None] = {}

    def dispatch(self, job: ClaimedJob) -> None:
        self.dispatch_many([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One atomic round trip for the chunk; a chunk with any job the fast path cannot
        carry goes through ``send_task`` whole, in order (rare: it needs unusual routing)."""
        lists: dict[str, list[str]] = {}
        for job in jobs:
            if job.envelope:  # built when the job was accepted
                key, message = decode_envelope(job.envelope)
                lists.setdefault(key, []).append(message)
                continue
            built = built_for_send(self._build, job) if self._json else None
            if built is None:
                self._fallback.dispatch_many(jobs, keep_going)
                return
            key, message = built
            lists.setdefault(key, []).append(message)
        if not keep_going():  # the last moment to step aside: the push below is all or nothing
            raise BatchDispatchError(0, lease_lost())
        try:
            pipeline = self._redis.pipeline(transaction=True)
            for key, messages in lists.items():
                pipeline.lpush(key, *messages)
            pipeline.execute()
        except redis.RedisError as exc:
            raise BatchDispatchError(0, exc) from exc

    def envelope(self, job: NewJob) -> str | None:
        """The job's envelope (``envelopes.encode_envelope``), built as it is accepted
        (``EnvelopeMaker``). Jobs that can expire get none: their expiry is checked, and
        recorded, on the claim path."""
        if not self._json or release_facts(job.payload).expires_at is not None:
            return None
        built = self._build(job)
        return None if built is None else encode_envelope(*built)

    def list_server(self) -> tuple[str, int]:
        """The broker server's ``run_id`` and database (``ListBroker``)."""
        run_id = str(self._redis.info("server")["run_id"])
        return run_id, int(self._redis.connection_pool.connection_kwargs.get("db") or 0)

    def _build(self, job: ClaimedJob | NewJob) -> tuple[str, str] | None:
        """The list key and the message for one job, or ``None`` for the slow path.

        The message is spliced from JSON text: the template's parts were serialised once, and
        only the per-job fields (id, argument reprs, body, delivery tag) are encoded here.
        """
        facts = release_facts(job.payload)
        args, kwargs, stored = facts.args, facts.kwargs, facts.options
        if carries_own_identity(stored):  # a stored retry: send_task keeps its task id
            return None
        template = self._template(job.task, facts)
        if template is None:
            return None
        job_id = quoted(job.id)
        expiry = ttl = ""
        if facts.expires_at is not None:
            expiry = f'"expires":{_dumps(expires_header(facts.expires_at))},'
            ttl = f'"expiration":"{expiration(facts.expires_at, time.time())}",'
        body = f"[{facts.args_json},{facts.kwargs_json},{template.embed_json}]".encode()
        # kombu only needs a unique delivery tag (it keys its unacked hash by it): 128 random
        # bits as hex cost a fraction of a uuid4 string (``random`` is reseeded in a forked child)
        return template.key, (
            f'{{"body":"{binascii.b2a_base64(body, newline=False).decode()}",'
            '"content-encoding":"utf-8","content-type":"application/json",'
            f'"headers":{{"id":{job_id},"root_id":{job_id},{expiry}'
            f'"{RELEASE_HEADER}":"{due_header(job.due_at)}",'
            f'"argsrepr":{quoted(_short_repr(args))},"kwargsrepr":{quoted(_short_repr(kwargs))},'
            f"{template.headers_json}}},"
            f'"properties":{{"correlation_id":{job_id},{ttl}'
            f'"delivery_tag":"{random.getrandbits(128):032x}",{template.properties_json}}}}}'
        )

    def _template(self, task: str, facts: ReleaseFacts) -> _Template | None:
        """Everything but the per-job fields, from Celery's own message builder, once per task
        and option set: a message stays exactly what this Celery version would send."""
        stored = facts.options
        cache_key = (task, options_key(facts))
        if cache_key in self._templates:
            return self._templates[cache_key]
        options = send_task_options(self.app, task, stored)
        route = {} if options is None else self.app.amqp.router.route(dict(options), task, (), {})
        queue = route.get("queue")
        template = None
        if options is not None and queue is not None and _direct(queue):
            sample = sample_message(self.app, task, options, self._origin)
            priority = route.get("priority", options.get("priority")) or 0
            headers = {**sample.headers, **(options.get("headers") or {})}
            properties = {
                **sample.properties,
                "delivery_mode": delivery_mode(self.app, route, queue),
                "delivery_info": {"exchange": "", "routing_key": queue.name},
                "priority": priority,
                "body_encoding": "base64",
            }
            per_job_headers = _PER_JOB_HEADERS + (("expires",) if "expires" in stored else ())
            template = _Template(
                key=self._list_key(queue.name, priority),
                headers_json=_members(headers, per_job_headers),
                properties_json=_members(properties, _PER_JOB_PROPERTIES),
                embed_json=_dumps(sample.body[2]),
            )
        self._templates[cache_key] = template
        return template

    def _list_key(self, queue: str, priority: int) -> str:
        """kombu's Redis transport (``Channel._put``): one list per priority step, the priority
        held to 0..9 and then to the highest step at or below it (5 goes to step 3's list)."""
        held = max(min(int(priority), _MAX_PRIORITY), 0)
        step = self._steps[bisect.bisect(self._steps, held) - 1]
        return queue if step == 0 else f"{queue}{self._separator}{step}"
