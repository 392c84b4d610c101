"""The fast path to a RabbitMQ (AMQP 0-9-1) broker: a whole chunk of due jobs in one transaction.

``send_task`` costs over half a millisecond of CPU per message, much of it py-amqp encoding the
same twenty-odd Celery headers again for every message. This dispatcher takes each message's
constant parts once per task and option set from Celery's own ``app.amqp.as_task_v2`` (through
``message_template``), keeps them as ready AMQP bytes, and per job encodes only what differs: the
id, the argument reprs, the body and the expiry. A chunk's frames go out in one socket write on
one channel inside an AMQP transaction, and ``dispatch_many`` returns only after the broker's
``tx.commit-ok``, which RabbitMQ sends once every message of the chunk is in its queue (persisted,
for the durable queues and persistent messages Celery uses). A chunk is all or nothing: when
anything fails before the commit, none of it is delivered and ``BatchDispatchError(0, ...)`` is
raised; the next call connects afresh.

A worker receives what ``send_task`` would have published: protocol 2 headers with the job id as
task id and root id, the route's exchange and routing key, priority, delivery mode, the
``expires`` header and per-message TTL (``expiration``) when the job carries an expiry. The
routed queue is declared (with its exchange and binding) once per connection, as kombu's
``maybe_declare`` does, and every message is published ``mandatory``: a message the broker cannot
route (its queue was deleted after the declaration) comes back, and is declared and sent again.

Not carried: serializers other than JSON, compression, routes whose exchange/routing key may not
reach the declared queue (topic or fanout exchanges, broadcast queues), and other exotic options;
a chunk holding such a job goes through ``send_task`` whole. Celery's
``before_task_publish``/``after_task_publish`` signals are not sent for fast-path messages, and
``reply_to`` is empty (no caller waits on an RPC result of a job released later).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import amqp  # type: ignore[import-untyped]
from amqp import spec
from amqp.serialization import dumps as amqp_dumps  # type: ignore[import-untyped]
from celery.utils.functional import maybe_list
from kombu.common import Broadcast
from kombu.entity import Queue

from storage_adapters import ClaimedJob
from storage_adapters.urls import mask_url

from ..dispatchers import (
    BatchDispatchError,
    CeleryDispatcher,
    KeepGoing,
    always,
    lease_lost,
)
from ..errors import ConfigurationError, DispatchError, LeaseLost
from ..jobs import decode_payload
from .message_template import (
    carries_own_identity,
    dumps,
    expires_header,
    options_key,
    origin,
    sample_message,
    short_repr,
    template_options,
)

__all__ = ["AMQP_SCHEMES", "AmqpPublisher"]

logger = logging.getLogger("parallel_scheduler.celery.amqp")

AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
Guarantee = Literal["transaction", "confirms"]

_FRAME_END = b"\xce"
_frame_head = struct.Struct(">BHI").pack  # frame type, channel, payload size
_content_head = struct.Struct(">HHQ").pack  # class id, weight, body size
_u32 = struct.Struct(">I").pack
_BASIC = spec.Basic.Publish[0]
#: Idle connections kept for the next chunks (one per concurrent caller is what gets used).
_MAX_IDLE_LINKS = 16
#: What ``send_task_message`` consumes itself; anything else in a route becomes a message property.
_SENDER_KEYS = frozenset(
    {
        "queue", "exchange", "routing_key", "exchange_type", "delivery_mode", "serializer",
        "compression", "headers", "priority", "retry", "retry_policy", "timeout",
        "confirm_timeout", "event_dispatcher",
    }
)  # fmt: skip
_PROPERTY_NAMES = frozenset(name for name, _ in amqp.Message.PROPERTIES)
#: Headers that differ per job, spliced in after the template's own.
_PER_JOB_HEADERS = ("id", "root_id", "argsrepr", "kwargsrepr", "expires")
#: The options ``send_task`` hands its router (the rest go to the message builder).
_ROUTED = frozenset({"queue", "exchange", "routing_key", "priority", "headers", "delivery_mode"})
_DELIVERY_MODES = {"transient": 1, "persistent": 2}  # kombu's names for them


def _key(name: str) -> bytes:
    """A header table entry's prefix for a long-string value: the key, then the type ``S``."""
    raw = name.encode()
    return bytes([len(raw)]) + raw + b"S"


_ID, _ROOT_ID, _ARGSREPR, _KWARGSREPR, _EXPIRES = (_key(name) for name in _PER_JOB_HEADERS)


def _entry(key: bytes, value: str) -> bytes:
    raw = value.encode()
    return key + _u32(len(raw)) + raw


def _shortstr(raw: bytes) -> bytes:
    return bytes([len(raw)]) + raw


def broker_scheme(app: Any) -> str:
    """The scheme of the app's (first) broker URL for producing; Celery's default is amqp."""
    url = str(app.conf.broker_write_url or app.conf.broker_url or "amqp://")
    return url.split(";", 1)[0].partition("://")[0].lower()


def masked_broker_url(app: Any) -> str:
    url = str(app.conf.broker_write_url or app.conf.broker_url or "")
    return ";".join(mask_url(part) for part in url.split(";"))


@dataclass(frozen=True)
class _Template:
    """One (task, options) message's constant parts, as AMQP bytes ready to splice."""

    queue: Any  # the kombu Queue to declare before the first publish on a connection
    method: bytes  # the whole basic.publish method payload (class/method ids included)
    flags: bytes  # property flags without ``expiration``
    flags_expiring: bytes  # ... and with it
    before_headers: bytes  # property values before application_headers
    headers: bytes  # the constant header table entries (``expires`` none), without the length
    headers_expiring: bytes  # ... and without ``expires``, which then comes per job
    before_correlation_id: bytes
    before_expiration: bytes
    after_expiration: bytes
    embed: str  # the body's third element (callbacks, errbacks, chain, chord) as JSON


@dataclass(frozen=True)
class _Message:
    template: _Template
    job_id: str
    properties: bytes  # the content header payload after class id, weight and body size
    body: bytes


class _Returned(DispatchError):
    """The broker could not route some messages of a committed chunk."""


class _TooLarge(Exception):
    """A message's content header does not fit one frame of this connection."""


class _Link:
    """One connection and one channel in transaction (or confirm) mode, used by one thread at a
    time; dropped after any error, so a failed connection is never used again."""

    def __init__(self, app: Any, guarantee: Guarantee, timeout: float) -> None:
        options = dict(app.conf.broker_transport_options or {})
        options["confirm_publish"] = False  # py-amqp would wait after every message
        options.setdefault("write_timeout", timeout)
        self.client = app.connection_for_write(transport_options=options)
        try:
            self.client.connect()
            self.connection = self.client.connection
            if not isinstance(self.connection, amqp.Connection):
                raise ConfigurationError(
                    f"the AMQP fast path needs kombu's py-amqp transport, not "
                    f"{type(self.connection).__name__}"
                )
            self.channel = self.client.channel()
            self.channel.events["basic_return"].add(self._on_return)
            self.guarantee = guarantee
            self.timeout = timeout
            self.declared: set[str] = set()
            self.returned: list[str] = []
            self.published = 0  # confirm mode: delivery tags handed out ...
            self.confirmed = 0  # ... and acknowledged
            self.rejected = False
            self.broken = False
            if guarantee == "transaction":
                self.channel.tx_select()
            else:
                self.channel.events["basic_ack"].add(self._on_ack)
                self.channel.events["basic_nack"].add(self._on_nack)
                self.channel.confirm_select()
        except BaseException:
            self.close()
            raise

    def _on_return(self, exc: Any, exchange: str, routing_key: str, message: Any) -> None:
        self.returned.append(str(message.properties.get("correlation_id")))

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self.confirmed = max(self.confirmed, delivery_tag)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self.rejected = True

    def alive(self) -> bool:
        """False when the broker closed the idle connection (read without waiting)."""
        try:
            self.connection.drain_events(timeout=0)
        except TimeoutError:
            return True
        except Exception:
            return False
        return True

    def declare(self, queue: Any) -> None:
        if queue.name not in self.declared:
            queue(self.channel).declare()
            self.declared.add(queue.name)

    def publish(self, messages: Sequence[_Message], keep_going: KeepGoing) -> list[str]:
        """Publish ``messages`` durably; returns the ids of messages the broker sent back."""
        frames = self._frames(messages)
        for message in messages:
            self.declare(message.template.queue)
        self.returned = []
        if self.guarantee == "confirms" and not keep_going():
            raise lease_lost()
        self.connection.transport.write(frames)
        if self.guarantee == "transaction":
            if not keep_going():  # the last moment to step aside: nothing is committed yet
                try:
                    self.channel.tx_rollback()
                except Exception:
                    self.broken = True  # the transaction dies with the connection
                raise lease_lost()
            self.channel.send_method(spec.Tx.Commit)
            self.channel.wait(spec.Tx.CommitOk, timeout=self.timeout)
        else:
            self.published += len(messages)
            while self.confirmed < self.published and not self.rejected:
                self.channel.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=self.timeout)
            if self.rejected:
                raise DispatchError("the broker rejected (nacked) a published message")
        return self.returned

    def _frames(self, messages: Sequence[_Message]) -> bytes:
        """Each message's basic.publish method frame, content header frame and body frame(s)."""
        channel = self.channel.channel_id
        most = self.connection.frame_max - 8
        parts: list[bytes] = []
        add = parts.append
        for message in messages:
            method = message.template.method
            add(_frame_head(1, channel, len(method)))
            add(method)
            add(_FRAME_END)
            body = message.body
            header = _content_head(_BASIC, 0, len(body)) + message.properties
            if len(header) > most:
                raise _TooLarge(message.job_id)
            add(_frame_head(2, channel, len(header)))
            add(header)
            add(_FRAME_END)
            for start in range(0, len(body), most):
                piece = body[start : start + most]
                add(_frame_head(3, channel, len(piece)))
                add(piece)
                add(_FRAME_END)
        return b"".join(parts)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection has nothing to release
            self.client.release()


class AmqpPublisher:
    """A ``Dispatcher`` for apps whose broker is RabbitMQ (``amqp://``, ``amqps://``,
    ``pyamqp://``): one transaction (one round trip) per chunk.

    Thread-safe: each concurrent ``dispatch_many`` uses its own connection from a small pool, and
    a connection that failed is dropped, so the next call reconnects. ``timeout`` bounds the wait
    for the broker's answer; when it runs out the chunk counts as not sent (it may then be
    delivered twice, never lost: the job id is the task id).

    ``guarantee="confirms"`` waits for publisher confirms of the whole chunk instead (the
    messages pipelined, one wait at the end; py-amqp's own ``confirm_publish`` would wait after
    every message). The broker has the chunk when the call returns either way; confirms cost
    RabbitMQ some 10% less CPU per message, but they are not all or nothing: after a failure
    part of the chunk may be queued already, and is then sent again. The transaction is the
    default for its all-or-nothing chunks.
    """

    def __init__(
        self, app: Any, *, timeout: float = 15.0, guarantee: Guarantee = "transaction"
    ) -> None:
        scheme = broker_scheme(app)
        if scheme not in AMQP_SCHEMES:
            raise ConfigurationError(
                "the AMQP fast publish path needs a RabbitMQ broker "
                f"({', '.join(s + '://' for s in AMQP_SCHEMES)}), not {masked_broker_url(app)!r}"
            )
        if guarantee not in ("transaction", "confirms"):
            raise ConfigurationError(
                f"guarantee must be transaction or confirms, not {guarantee!r}"
            )
        self.app = app
        self.timeout = timeout
        self.guarantee: Guarantee = guarantee
        self._fallback = CeleryDispatcher(app)
        self._origin = origin()
        self._json = app.conf.task_serializer == "json" and not app.conf.task_compression
        self._templates: dict[tuple[str, str], _Template | None] = {}
        self._idle: list[_Link] = []
        self._guard = threading.Lock()
        self._pid = os.getpid()
        password = app.connection_for_write().password
        self._secret = password if isinstance(password, str) and password else None

    def dispatch(self, job: ClaimedJob) -> None:
        self.dispatch_many([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        """One transaction for the chunk; a chunk with any job the fast path cannot carry goes
        through ``send_task`` whole, in order."""
        messages: list[_Message] = []
        for job in jobs:
            built = self._build(job) if self._json else None
            if built is None:
                self._fallback.dispatch_many(jobs, keep_going)
                return
            messages.append(built)
        if not messages:
            return
        try:
            link = self._checkout()
        except Exception as exc:
            raise BatchDispatchError(0, self._scrubbed(exc, "cannot connect to")) from exc
        try:
            self._publish(link, messages, keep_going)
        except _TooLarge:  # nothing was sent; what send_task makes of it is the answer
            self._drop_or_keep(link, keep=True)
            self._fallback.dispatch_many(jobs, keep_going)
            return
        except LeaseLost as exc:
            self._drop_or_keep(link, keep=not link.broken)
            raise BatchDispatchError(0, exc) from exc
        except Exception as exc:
            link.close()
            raise BatchDispatchError(0, self._scrubbed(exc, "publishing failed on")) from exc
        self._drop_or_keep(link, keep=True)

    @staticmethod
    def _publish(link: _Link, messages: Sequence[_Message], keep_going: KeepGoing) -> None:
        returned = link.publish(messages, keep_going)
        if returned:  # a queue vanished after it was declared: declare it again, resend those
            link.declared.clear()
            again = set(returned)
            returned = link.publish([m for m in messages if m.job_id in again], keep_going)
            if returned:
                raise _Returned(f"the broker could not route {len(returned)} message(s)")

    def close(self) -> None:
        """Close the idle connections (a call after this one opens new ones)."""
        with self._guard:
            idle, self._idle = self._idle, []
        for link in idle:
            link.close()

    # -- connections ------------------------------------------------------------------------

    def _checkout(self) -> _Link:
        with self._guard:
            if self._pid != os.getpid():  # forked: the parent's sockets are not ours to use
                self._idle, self._pid = [], os.getpid()
            idle = self._idle.pop() if self._idle else None
        while idle is not None and not idle.alive():
            idle.close()
            with self._guard:
                idle = self._idle.pop() if self._idle else None
        if idle is not None:
            return idle
        link = _Link(self.app, self.guarantee, self.timeout)
        logger.info(
            "fast publish: connected to the AMQP broker %s (%s per chunk)",
            masked_broker_url(self.app),
            "one transaction" if self.guarantee == "transaction" else "publisher confirms",
        )
        return link

    def _drop_or_keep(self, link: _Link, keep: bool) -> None:
        if keep:
            with self._guard:
                if len(self._idle) < _MAX_IDLE_LINKS and self._pid == os.getpid():
                    self._idle.append(link)
                    return
        link.close()

    def _scrubbed(self, exc: BaseException, what: str) -> DispatchError:
        """The error as text naming the broker, with any password masked."""
        text = f"{type(exc).__name__}: {exc}"
        if self._secret:
            text = text.replace(self._secret, "***")
        return DispatchError(f"{what} the AMQP broker {masked_broker_url(self.app)}: {text}")

    # -- messages ---------------------------------------------------------------------------

    def _build(self, job: ClaimedJob) -> _Message | None:
        """One job's message, or ``None`` for the slow path."""
        args, kwargs, stored = decode_payload(job.payload)
        if carries_own_identity(stored):  # a stored retry: send_task keeps its task id
            return None
        template = self._template(job.task, stored, job.payload)
        if template is None:
            return None
        properties = _properties(template, job.id, args, kwargs, stored.get("expires"), time.time())
        if properties is None:
            return None
        body = f"[{dumps(args)},{dumps(kwargs)},{template.embed}]".encode()
        return _Message(template, job.id, properties, body)

    def _template(self, task: str, stored: dict[str, Any], payload: str) -> _Template | None:
        cache_key = (task, options_key(stored, payload))
        if cache_key in self._templates:
            return self._templates[cache_key]
        try:
            template = self._make_template(task, stored)
        except Exception as exc:  # send_task will meet (and report) the same problem
            logger.info(
                "the fast path does not carry %s with options %s: %s", task, sorted(stored), exc
            )
            template = None
        self._templates[cache_key] = template
        return template

    def _make_template(self, task: str, stored: dict[str, Any]) -> _Template | None:
        """What ``send_task`` and ``send_task_message`` would do with these options, once."""
        options = self._send_task_options(task, stored)
        if options is None:
            return None
        routed = {k: v for k, v in options.items() if k in _ROUTED}
        route = self.app.amqp.router.route(routed, task, (), {})
        if (set(route) - _SENDER_KEYS) & _PROPERTY_NAMES:
            return None  # Celery would set other message properties from the route
        destination = self._destination(route)
        if destination is None:
            return None
        queue, exchange, routing_key = destination
        sample = sample_message(self.app, task, options, self._origin)
        headers = dict(sample.headers)
        headers.update(route.get("headers") or {})
        for name in _PER_JOB_HEADERS[:4]:
            headers.pop(name, None)
        delivery_mode = (
            route.get("delivery_mode")
            or getattr(queue.exchange, "delivery_mode", None)
            or self.app.conf.task_default_delivery_mode
        )
        properties = {
            "content_type": "application/json",
            "content_encoding": "utf-8",
            "delivery_mode": _DELIVERY_MODES.get(delivery_mode, delivery_mode) or 2,
            "priority": route.get("priority", 0),  # kombu's default when the route has none
            "reply_to": sample.properties.get("reply_to"),
        }
        method = amqp_dumps("Bssbb", (0, exchange, routing_key, True, False))
        template = self._splice(queue, method, properties, headers, dumps(sample.body[2]))
        return template if self._matches_py_amqp(template, properties, headers) else None

    def _send_task_options(self, task: str, stored: dict[str, Any]) -> dict[str, Any] | None:
        """The stored options as ``send_task`` would see them (the registered task's own options
        under the call's), or ``None`` when the fast path cannot carry them."""
        options = template_options(stored)
        for name in ("link", "link_error"):
            if options.get(name) is not None:
                options[name] = maybe_list(options[name])
        registered = self.app._tasks.get(task)
        if registered is not None and hasattr(registered, "_get_exec_options"):
            own = {k: v for k, v in registered._get_exec_options().items() if v is not None}
            if "expires" in own and "expires" not in stored:
                return None  # a relative expiry counted from the release: per job
            options = {**own, **options}
        if options.pop("immediate", None) or options.pop("mandatory", None):
            return None
        if (options.get("serializer") or "json") != "json" or options.get("compression"):
            return None
        return options

    def _destination(self, route: dict[str, Any]) -> tuple[Any, str, str] | None:
        """``send_task_message``'s queue, exchange and routing key for a route, or ``None`` when
        the message might not reach the queue Celery declares (``send_task`` then decides)."""
        queue = route.get("queue")
        exchange = route.get("exchange")
        routing_key = route.get("routing_key")
        if queue is None and exchange is None:
            queue = self.app.amqp.default_queue
        if isinstance(queue, str):
            queue = self.app.amqp.queues[queue]
        if not isinstance(queue, Queue) or isinstance(queue, Broadcast):
            return None
        if (route.get("exchange_type") or getattr(queue.exchange, "type", "direct")) != "direct":
            return None
        exchange_name = getattr(exchange, "name", exchange)
        if not exchange_name or not routing_key:
            return queue, "", queue.name  # Celery's shortcut: the anonymous exchange
        if (exchange_name, routing_key) != (queue.exchange.name, queue.routing_key):
            return None
        return queue, str(exchange_name), str(routing_key)

    @staticmethod
    def _splice(
        queue: Any, method: bytes, properties: dict[str, Any], headers: dict[str, Any], embed: str
    ) -> _Template:
        """Serialise the constant properties in the order AMQP lists them, cut where a per-job
        value goes (application_headers, correlation_id, expiration)."""
        segments: list[bytes] = []
        formats: list[str] = []
        values: list[Any] = []
        flags = flags_expiring = 0
        for position, (name, kind) in enumerate(amqp.Message.PROPERTIES):
            bit = 1 << (15 - position)
            if name in ("application_headers", "correlation_id", "expiration"):
                segments.append(amqp_dumps("".join(formats), values) if formats else b"")
                formats, values = [], []
                flags_expiring |= bit
                flags |= 0 if name == "expiration" else bit
            elif properties.get(name) is not None:
                formats.append(kind)
                values.append(properties[name])
                flags |= bit
                flags_expiring |= bit
        segments.append(amqp_dumps("".join(formats), values) if formats else b"")
        return _Template(
            queue=queue,
            method=struct.pack(">HH", *spec.Basic.Publish) + method,
            flags=struct.pack(">H", flags),
            flags_expiring=struct.pack(">H", flags_expiring),
            before_headers=segments[0],
            headers=amqp_dumps("F", [headers])[4:],
            headers_expiring=amqp_dumps(
                "F", [{k: v for k, v in headers.items() if k != "expires"}]
            )[4:],
            before_correlation_id=segments[1],
            before_expiration=segments[2],
            after_expiration=segments[3],
            embed=embed,
        )

    @staticmethod
    def _matches_py_amqp(
        template: _Template, properties: dict[str, Any], headers: dict[str, Any]
    ) -> bool:
        """Check the splice once against py-amqp's own encoding of the same message."""
        job_id, expires = "probe-id", 4102444800.0
        for expiring in (False, True):
            spliced = _properties(
                template, job_id, [1], {"k": "v"}, expires if expiring else None, expires - 5
            )
            full = {
                **{k: v for k, v in headers.items() if not (expiring and k == "expires")},
                "id": job_id, "root_id": job_id, "argsrepr": "[1]", "kwargsrepr": "{'k': 'v'}",
                **({"expires": expires_header(expires)} if expiring else {}),
            }  # fmt: skip
            expected = amqp.Message(
                b"",
                application_headers=full,
                correlation_id=job_id,
                expiration="5000" if expiring else None,
                **properties,
            )._serialize_properties()
            if spliced != expected:
                logger.warning("the AMQP fast path's encoding differs from py-amqp's; not used")
                return False
        return True


def _properties(
    template: _Template,
    job_id: str,
    args: list[Any],
    kwargs: dict[str, Any],
    expires: float | None,
    now: float,
) -> bytes | None:
    """A message's content header properties: the template's bytes with the per-job values
    (id, root id, argument reprs, correlation id, expiry) spliced in; ``None`` if the job id is
    too long for a short string."""
    raw_id = job_id.encode()
    if len(raw_id) > 255:
        return None
    entries = (
        (template.headers if expires is None else template.headers_expiring)
        + _ID + _u32(len(raw_id)) + raw_id
        + _ROOT_ID + _u32(len(raw_id)) + raw_id
        + _entry(_ARGSREPR, short_repr(args))
        + _entry(_KWARGSREPR, short_repr(kwargs))
    )  # fmt: skip
    if expires is None:
        flags, expiration = template.flags, b""
    else:
        entries += _entry(_EXPIRES, expires_header(expires))
        milliseconds = int(max(0.0, float(expires) - now) * 1000)
        flags, expiration = template.flags_expiring, _shortstr(b"%d" % milliseconds)
    return b"".join(
        (
            flags, template.before_headers, _u32(len(entries)), entries,
            template.before_correlation_id, _shortstr(raw_id),
            template.before_expiration, expiration, template.after_expiration,
        )
    )  # fmt: skip
