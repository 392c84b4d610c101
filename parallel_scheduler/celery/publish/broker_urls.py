"""The app's broker URL as the publishers need it: its scheme (which fast path serves it) and a
form safe to print (passwords masked), for the errors and logs that name the broker."""

from __future__ import annotations

from typing import Any

from storage_adapters.urls import mask_url

__all__ = ["AMQP_SCHEMES", "REDIS_SCHEMES", "broker_scheme", "masked_broker_url"]

#: The schemes Celery reaches RabbitMQ by (``pyamqp`` is kombu's name for py-amqp).
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
#: The schemes of kombu's Redis transport.
REDIS_SCHEMES = ("redis", "rediss", "unix")


def _write_url(app: Any) -> str:
    return str(app.conf.broker_write_url or app.conf.broker_url or "")


def broker_scheme(app: Any) -> str:
    """The scheme of the app's (first) broker URL for producing; Celery's default is amqp."""
    url = _write_url(app) or "amqp://"
    return url.split(";", 1)[0].partition("://")[0].lower()


def masked_broker_url(app: Any) -> str:
    """The app's broker URL(s) for producing, each with its password masked."""
    return ";".join(mask_url(part) for part in _write_url(app).split(";"))
