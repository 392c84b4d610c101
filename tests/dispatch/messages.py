"""Judging a dispatcher's message against Celery's own: ``same_call`` says two messages on the
broker (``devtools.broker_messages.BrokerMessage``) are one call, but for what every publish
makes anew."""

from __future__ import annotations

import time
from typing import Any

from devtools.broker_messages import BrokerMessage
from parallel_scheduler.celery.publish.send_task import RELEASE_HEADER

#: Stored options of a call, each judged against send_task's message for the same call: none;
#: a priority, headers of the caller's and time limits; an expiry, a callback, a shadow name and
#: a transient delivery mode.
CALL_OPTIONS: dict[str, dict[str, Any]] = {
    "plain": {},
    "priority-headers-limits": {
        "priority": 5,
        "headers": {"x_tenant": "acme"},
        "time_limit": 9,
        "soft_time_limit": 8,
    },
    "expires-link-shadow-transient": {
        "expires": time.time() + 3600,
        "ignore_result": True,
        "shadow": "shown-as",
        "link": {"task": "x.cb", "args": [], "kwargs": {}, "options": {}},
        "delivery_mode": "transient",
    },
}

#: Per publish, whoever publishes: the job id (and what carries it), the TTL counted at publish,
#: and the reply_to send_task fills with its producer thread's id for RPC results (no caller
#: waits on the result of a job released later; the fast paths leave it empty).
#: (the release's header, the job's due time, is on every released message and on no call a
#: user's code makes; ``same_call`` checks it on the released one)
PER_PUBLISH_HEADERS = ("id", "root_id", RELEASE_HEADER)
PER_PUBLISH_PROPERTIES = ("correlation_id", "reply_to", "expiration")


def same_call(expected: BrokerMessage, got: BrokerMessage) -> None:
    """Assert ``got`` is ``expected`` but for what differs per publish (and the delivery tag,
    kombu's key for a message a worker holds unacknowledged)."""
    assert got.lane == expected.lane  # the same list (on Redis, the priority step's) or queue
    assert (got.exchange, got.routing_key) == (expected.exchange, expected.routing_key)
    assert (got.content_type, got.content_encoding) == (
        expected.content_type,
        expected.content_encoding,
    )
    float(got.headers[RELEASE_HEADER])  # released from storage: the job's due time
    leave_out = PER_PUBLISH_HEADERS
    assert {k: v for k, v in got.headers.items() if k not in leave_out} == {
        k: v for k, v in expected.headers.items() if k not in leave_out
    }  # task, reprs, limits, shadow, expires, ignore_result, origin, ...
    leave_out = PER_PUBLISH_PROPERTIES
    assert {k: v for k, v in got.properties.items() if k not in leave_out} == {
        k: v for k, v in expected.properties.items() if k not in leave_out
    }  # delivery mode, priority, ...
    assert ("expiration" in got.properties) == ("expiration" in expected.properties)
    if "expiration" in expected.properties:  # milliseconds left, counted at each publish
        left = int(expected.properties["expiration"]) - int(got.properties["expiration"])
        assert abs(left) < 5000
    # the body: the same JSON value (kombu escapes non-ASCII text, a fast path writes it as UTF-8,
    # which its content encoding says; a worker decodes both to the same call)
    assert got.body == expected.body
