"""Which ``apply_async``/``send_task`` options can wait in storage, and in what form.

Routing and execution options are carried (queue names, not kombu objects; ``expires`` made
absolute, since a relative one would otherwise count from the release, not the call). A call's
place in a workflow (its retry count, root and parent, group) travels as the message headers
Celery would have set from it: ``send_task`` lets a call's ``headers`` override its own, so the
release path needs nothing new. The rest of a chain and link/link_error callbacks are JSON
signatures and are carried as they are. Options that only make sense at call time (a chord being
counted, a connection to another broker) keep the call on Celery's own path instead, with the
reason: never dropped.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from parallel_scheduler.job_checks import ROUTING_OPTIONS

__all__ = ["IDENTITY_HEADERS", "carried_options", "explain", "reasons_not_to_defer"]

#: Options Celery passes on calls, harmless to drop when they hold these values (``None``, the
#: "not set" of every option, is always harmless).
_DEFAULTS: dict[str, Any] = {
    "retries": 0,
    "replaced_task_nesting": 0,
    "add_to_parent": True,
    "immediate": False,
    "mandatory": False,
}
#: Options that never change where or how a deferred job is sent (``add_to_parent`` adds the
#: result to the calling task's trail, which ``send_task`` does at call time, stored or not).
_IGNORED = frozenset({"result_cls", "task_type", "add_to_parent"})
#: Options that place a call in a workflow, and the protocol 2 header each one becomes.
IDENTITY_HEADERS: dict[str, str] = {
    "retries": "retries",
    "root_id": "root_id",
    "parent_id": "parent_id",
    "group_id": "group",
    "group_index": "group_index",
    "replaced_task_nesting": "replaced_task_nesting",
    "origin": "origin",
}
#: Why an option keeps a call on Celery's own eta path.
_WHY: dict[str, str] = {
    "chord": "a chord member reports to its chord, which Celery sets up as the call is made",
    "producer": "an explicit producer for another broker",
    "connection": "an explicit connection to another broker",
    "publisher": "an explicit producer for another broker",
    "stamped_headers": "stamps are applied to the message as the call is made",
    "task_id": "the task id is too long to derive the retry's own job id from",
}


def _carried(name: str) -> bool:
    return name in ROUTING_OPTIONS or name in IDENTITY_HEADERS or name in _IGNORED


def reasons_not_to_defer(options: Mapping[str, Any]) -> list[str]:
    """Names of options whose values cannot wait in storage (empty when the call can be stored)."""
    reasons = []
    for name, value in options.items():
        if value is None or _carried(name):
            continue
        if name in _DEFAULTS and value == _DEFAULTS[name]:
            continue
        reasons.append(name)
    return sorted(reasons)


def explain(reasons: list[str]) -> str:
    """The reasons as one sentence for the log: each option with why it must be sent now."""
    return "; ".join(
        f"{name}: {_WHY.get(name, 'only meaningful as the call is made')}" for name in reasons
    )


def _queue_name(queue: Any) -> Any:
    return getattr(queue, "name", queue)


def _absolute_expires(expires: Any, now: datetime) -> Any:
    """Seconds from now, or an ISO 8601 string (a retry passes its task's ``expires`` header so)
    become an aware instant; the job model validates the result."""
    if isinstance(expires, numbers.Real) and not isinstance(expires, bool):
        seconds = float(expires)
        try:
            return now + timedelta(seconds=seconds)
        except (OverflowError, ValueError):  # 1e300, nan: past any date; refused by name
            return now.timestamp() + seconds
    if isinstance(expires, str):
        try:
            return datetime.fromisoformat(expires)
        except ValueError:
            return expires  # refused by the job model, with the value in the message
    return expires


def carried_options(options: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The options to store with the job, in the form ``JobSpec`` validates; a workflow position
    becomes headers (after the caller's own, which it overrides, as Celery's headers would)."""
    carried = {k: v for k, v in options.items() if k in ROUTING_OPTIONS and v is not None}
    if "queue" in carried:
        carried["queue"] = _queue_name(carried["queue"])
    if "exchange" in carried:
        carried["exchange"] = _queue_name(carried["exchange"])
    if "expires" in carried:
        carried["expires"] = _absolute_expires(carried["expires"], now)
    for name in ("link", "link_error", "chain"):
        if name in carried:
            carried[name] = _signatures(carried[name])
    identity = {
        header: options[name]
        for name, header in IDENTITY_HEADERS.items()
        if options.get(name) is not None and options[name] != _DEFAULTS.get(name)
    }
    if identity:
        carried["headers"] = {**dict(carried.get("headers") or {}), **identity}
    return carried


def _signatures(value: Any) -> Any:
    """Signatures are dicts; a list of them stays a list. Celery rebuilds them on the worker."""
    if isinstance(value, (list, tuple)):
        return [dict(v) for v in value]
    return dict(value)
