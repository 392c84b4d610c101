"""AMQP 0-9-1 at the byte level: a message's constant parts serialised once (a ``Template``), the
per-job values spliced into them, and a chunk's frames laid out for one socket write.

py-amqp encodes the same twenty-odd Celery headers again for every message; here they are encoded
once per task and option set, and a job costs only its id, argument reprs, body and expiry.
``matches_py_amqp`` checks a template once against py-amqp's own encoding before it is used.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import amqp  # type: ignore[import-untyped]
from amqp import spec
from amqp.serialization import dumps as amqp_dumps  # type: ignore[import-untyped]

from parallel_scheduler.celery.publish.message_template import (
    RELEASE_HEADER,
    due_header,
    expires_header,
    short_repr,
)
from parallel_scheduler.celery.publish.message_template import expiration as expiration_ms

__all__ = ["Message", "Template", "TooLarge", "frames", "matches_py_amqp", "properties", "splice"]

logger = logging.getLogger(__name__)

_FRAME_END = b"\xce"
_frame_head = struct.Struct(">BHI").pack  # frame type, channel, payload size
_content_head = struct.Struct(">HHQ").pack  # class id, weight, body size
_u32 = struct.Struct(">I").pack
_BASIC = spec.Basic.Publish[0]
#: Headers that differ per job, spliced in after the template's own.
PER_JOB_HEADERS = ("id", "root_id", "argsrepr", "kwargsrepr", "expires")


def _key(name: str) -> bytes:
    """A header table entry's prefix for a long-string value: the key, then the type ``S``."""
    raw = name.encode()
    return bytes([len(raw)]) + raw + b"S"


_ID, _ROOT_ID, _ARGSREPR, _KWARGSREPR, _EXPIRES = (_key(name) for name in PER_JOB_HEADERS)
_DUE = _key(RELEASE_HEADER)


def _entry(key: bytes, value: str) -> bytes:
    raw = value.encode()
    return key + _u32(len(raw)) + raw


def _shortstr(raw: bytes) -> bytes:
    return bytes([len(raw)]) + raw


@dataclass(frozen=True)
class Template:
    """One (task, options) message's constant parts, as AMQP bytes ready to splice."""

    queue: Any  # the kombu Queue to declare before the first publish on a connection
    exchange: str  # where the message is published ('' for the default exchange) ...
    routing_key: str  # ... and with which routing key
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
class Message:
    template: Template
    job_id: str
    properties: bytes  # the content header payload after class id, weight and body size
    body: bytes


class TooLarge(Exception):
    """A message's content header does not fit one frame of this connection."""


def splice(
    queue: Any,
    exchange: str,
    routing_key: str,
    values: dict[str, Any],
    headers: dict[str, Any],
    embed: str,
) -> Template:
    """Serialise the ``mandatory`` basic.publish method and the constant properties in the order
    AMQP lists them, cut where a per-job value goes (application_headers, correlation_id,
    expiration)."""
    segments: list[bytes] = []
    formats: list[str] = []
    pending: list[Any] = []
    flags = flags_expiring = 0
    for position, (name, kind) in enumerate(amqp.Message.PROPERTIES):
        bit = 1 << (15 - position)
        if name in ("application_headers", "correlation_id", "expiration"):
            segments.append(amqp_dumps("".join(formats), pending) if formats else b"")
            formats, pending = [], []
            flags_expiring |= bit
            flags |= 0 if name == "expiration" else bit
        elif values.get(name) is not None:
            formats.append(kind)
            pending.append(values[name])
            flags |= bit
            flags_expiring |= bit
    segments.append(amqp_dumps("".join(formats), pending) if formats else b"")
    method = amqp_dumps("Bssbb", (0, exchange, routing_key, True, False))
    return Template(
        queue=queue,
        exchange=exchange,
        routing_key=routing_key,
        method=struct.pack(">HH", *spec.Basic.Publish) + method,
        flags=struct.pack(">H", flags),
        flags_expiring=struct.pack(">H", flags_expiring),
        before_headers=segments[0],
        headers=amqp_dumps("F", [headers])[4:],
        headers_expiring=amqp_dumps("F", [{k: v for k, v in headers.items() if k != "expires"}])[
            4:
        ],
        before_correlation_id=segments[1],
        before_expiration=segments[2],
        after_expiration=segments[3],
        embed=embed,
    )


def properties(
    template: Template,
    job_id: str,
    args: list[Any],
    kwargs: dict[str, Any],
    expires: float | None,
    now: float,
    due_at: float,
) -> bytes | None:
    """A message's content header properties: the template's bytes with the per-job values
    (id, root id, argument reprs, the release's due-time header, correlation id, expiry) spliced
    in; ``None`` if the job id is too long for a short string."""
    raw_id = job_id.encode()
    if len(raw_id) > 255:
        return None
    entries = (
        (template.headers if expires is None else template.headers_expiring)
        + _ID + _u32(len(raw_id)) + raw_id
        + _ROOT_ID + _u32(len(raw_id)) + raw_id
        + _entry(_ARGSREPR, short_repr(args))
        + _entry(_KWARGSREPR, short_repr(kwargs))
        + _entry(_DUE, due_header(due_at))
    )  # fmt: skip
    if expires is None:
        flags, expiration = template.flags, b""
    else:
        entries += _entry(_EXPIRES, expires_header(expires))
        milliseconds = expiration_ms(expires, now)
        flags, expiration = template.flags_expiring, _shortstr(b"%d" % milliseconds)
    return b"".join(
        (
            flags, template.before_headers, _u32(len(entries)), entries,
            template.before_correlation_id, _shortstr(raw_id),
            template.before_expiration, expiration, template.after_expiration,
        )
    )  # fmt: skip


def matches_py_amqp(template: Template, values: dict[str, Any], headers: dict[str, Any]) -> bool:
    """Check the splice once against py-amqp's own encoding of the same message."""
    job_id, expires = "probe-id", 4102444800.0
    for expiring in (False, True):
        spliced = properties(
            template, job_id, [1], {"k": "v"}, expires if expiring else None, expires - 5, 12.5
        )
        full = {
            **{k: v for k, v in headers.items() if not (expiring and k == "expires")},
            "id": job_id, "root_id": job_id, "argsrepr": "[1]", "kwargsrepr": "{'k': 'v'}",
            RELEASE_HEADER: "12.5",
            **({"expires": expires_header(expires)} if expiring else {}),
        }  # fmt: skip
        expected = amqp.Message(
            b"",
            application_headers=full,
            correlation_id=job_id,
            expiration="5000" if expiring else None,
            **values,
        )._serialize_properties()
        if spliced != expected:
            logger.warning("the AMQP fast path's encoding differs from py-amqp's; not used")
            return False
    return True


def frames(messages: Sequence[Message], channel: int, frame_max: int) -> bytes:
    """Each message's basic.publish method frame, content header frame and body frame(s), for a
    connection whose frames hold at most ``frame_max`` bytes."""
    most = frame_max - 8
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
            raise TooLarge(message.job_id)
        add(_frame_head(2, channel, len(header)))
        add(header)
        add(_FRAME_END)
        for start in range(0, len(body), most):
            piece = body[start : start + most]
            add(_frame_head(3, channel, len(piece)))
            add(piece)
            add(_FRAME_END)
    return b"".join(parts)
