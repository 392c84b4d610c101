"""What RabbitMQ says when it will not take a message, in words for a job's ``last_error``: a
publish to an exchange it does not have (it closes the channel, ``404 NOT_FOUND``) or a
``mandatory`` message no queue is bound for (it sends it back, ``312 NO_ROUTE``)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["missing_exchange", "no_exchange_reason", "returned_reason"]

#: RabbitMQ's words when a publish names an exchange it does not have.
_NO_EXCHANGE = re.compile(r"no exchange '(.*)' in vhost '")
_NOT_FOUND = 404
_NO_ROUTE = 312


def missing_exchange(exc: BaseException) -> str | None:
    """The exchange a channel closed for, when the broker closed it for a publish to an
    exchange it does not have; else ``None``."""
    if getattr(exc, "reply_code", None) != _NOT_FOUND:
        return None
    found = _NO_EXCHANGE.search(str(getattr(exc, "reply_text", "")))
    return None if found is None else found.group(1)


def no_exchange_reason(exchange: str) -> str:
    return f"no exchange {exchange!r} on the broker"


def returned_reason(exc: Any, exchange: str, routing_key: str) -> str:
    """Why the broker sent a ``mandatory`` message back, in words."""
    if getattr(exc, "reply_code", None) == _NO_ROUTE:
        if not exchange:
            return f"no queue named {routing_key!r} on the broker"
        return f"no queue bound to route {routing_key!r} on exchange {exchange!r}"
    return f"the broker returned the message ({getattr(exc, 'reply_text', exc)!r})"
