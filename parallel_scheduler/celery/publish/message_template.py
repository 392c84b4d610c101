"""What the fast publish paths share: a task message's constant parts, taken once per task and
option set from Celery's own ``app.amqp.as_task_v2``, and the cheap per-job encoders.

A fast path asks Celery for one sample message per (task, stored options) and keeps it; per job it
then only encodes what differs between messages: the id, the argument reprs, the body, and the
expiry when the job carries one. So a worker sees what this Celery version would send.
"""

from __future__ import annotations

import json.encoder
import os
import socket
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from celery.utils.functional import maybe_list

from parallel_scheduler.celery.publish.send_task import RELEASE_HEADER, celery_options
from parallel_scheduler.delayed.envelopes import ReleaseFacts, compact_json

__all__ = [
    "RELEASE_HEADER",
    "REPR_LIMIT",
    "carries_own_identity",
    "delivery_mode",
    "due_header",
    "dumps",
    "expiration",
    "expires_header",
    "options_key",
    "origin",
    "quoted",
    "sample_message",
    "send_task_options",
    "short_repr",
    "template_options",
]

REPR_LIMIT = 1024  # Celery's limit for argsrepr/kwargsrepr


def due_header(due_at: float) -> str:
    """``RELEASE_HEADER``'s value (see ``send_task``) for a job due at ``due_at``."""
    return repr(float(due_at))


dumps = compact_json
#: A str as a JSON string literal, non-ASCII kept: what ``dumps`` makes of a str, without the
#: encoder's per-call set-up (the C function under it).
quoted: Callable[[str], str] = json.encoder.encode_basestring


def short_repr(value: Any) -> str:
    """``repr`` cut at Celery's length limit (cheaper than Celery's ``saferepr``)."""
    text = repr(value)
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 3] + "..."


def origin() -> str:
    """The ``origin`` header Celery's ``anon_nodename()`` gives a producer in this process."""
    return f"gen{os.getpid()}@{socket.gethostname()}"


def expires_header(expires: float) -> str:
    """A stored expiry (epoch seconds) as the ISO 8601 ``expires`` header Celery sends."""
    return datetime.fromtimestamp(expires, timezone.utc).isoformat()


def expiration(expires: float, now: float) -> int:
    """The per-message TTL kombu's producer sets from the expiry ``send_task`` hands it: the
    milliseconds left at publish, none below 0 (the ``expiration`` property, as text)."""
    return int(max(0.0, float(expires) - now) * 1000)


#: kombu's names for the delivery modes a route or call may give.
_DELIVERY_MODES = {"transient": 1, "persistent": 2}


def delivery_mode(app: Any, route: dict[str, Any], queue: Any) -> int:
    """The delivery mode ``send_task`` publishes with: the route's, else the queue exchange's,
    else the app's default, by number (persistent when none says)."""
    mode = (
        route.get("delivery_mode")
        or getattr(queue.exchange, "delivery_mode", None)
        or app.conf.task_default_delivery_mode
    )
    return int(_DELIVERY_MODES.get(mode, mode) or 2)


def options_key(facts: ReleaseFacts) -> str:
    """A cache key for a job's stored options, without their per-job ``expires``: their compact
    JSON, which the payload already holds as text unless an expiry has to be left out (equal
    options decoded from equal stored text encode equally)."""
    if "expires" in facts.options:
        return dumps({k: v for k, v in facts.options.items() if k != "expires"})
    return facts.options_json


def carries_own_identity(stored: dict[str, Any]) -> bool:
    """Whether a job's message keeps a task id or root id of its own (a stored retry keeps its
    task's id; see ``celery/retries.py``). The fast paths write the job id into both headers per
    job, so such a job goes through ``send_task``, whose ``headers`` override Celery's own."""
    headers = stored.get("headers") or {}
    return "id" in headers or "root_id" in headers


def template_options(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored options as ``send_task`` keyword arguments, less the per-job ``expires``."""
    return celery_options({k: v for k, v in stored.items() if k != "expires"})


def sample_message(
    app: Any, task: str, options: dict[str, Any], origin: str, task_id: str = "template"
) -> Any:
    """Celery's own message for a call of ``task`` with ``options`` and no arguments; a single
    ``link``/``link_error`` becomes a list, as ``send_task`` makes it (a worker iterates them).
    The rest of a chain travels in the body, the caller's reply queue in the properties."""
    return app.amqp.as_task_v2(
        task_id, task, (), {},
        callbacks=maybe_list(options.get("link")), errbacks=maybe_list(options.get("link_error")),
        time_limit=options.get("time_limit"), soft_time_limit=options.get("soft_time_limit"),
        shadow=options.get("shadow"), ignore_result=options.get("ignore_result"),
        chain=options.get("chain"), reply_to=options.get("reply_to"), origin=origin,
    )  # fmt: skip


def send_task_options(app: Any, task: str, stored: dict[str, Any]) -> dict[str, Any] | None:
    """The stored options as ``send_task`` would see them (the registered task's own options
    under the call's), or ``None`` when the fast path cannot carry them."""
    options = template_options(stored)
    for name in ("link", "link_error"):
        if options.get(name) is not None:
            options[name] = maybe_list(options[name])
    registered = app._tasks.get(task)
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
