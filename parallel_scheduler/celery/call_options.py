"""Which ``apply_async``/``send_task`` options can wait in storage, and in what form.

Routing and execution options are carried (queue names, not kombu objects; ``expires`` made
absolute, since a relative one would otherwise count from the release, not the call). Options
that only make sense at call time (a producer or connection object, a chord being built, a
retry of a running task) keep the call on Celery's own path instead: never dropped.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..jobs import ROUTING_OPTIONS

__all__ = ["carried_options", "reasons_not_to_defer"]

#: Options Celery passes on calls, harmless to drop when they hold these values (``None``, the
#: "not set" of every option, is always harmless).
_DEFAULTS: dict[str, Any] = {
    "retries": 0,
    "replaced_task_nesting": 0,
    "add_to_parent": True,
    "immediate": False,
    "mandatory": False,
}
#: Options that never change where or how a deferred job is sent.
_IGNORED = frozenset({"result_cls", "task_type"})


def reasons_not_to_defer(options: Mapping[str, Any]) -> list[str]:
    """Names of options whose values cannot wait in storage (empty when the call can be stored)."""
    reasons = []
    for name, value in options.items():
        if value is None or name in ROUTING_OPTIONS or name in _IGNORED:
            continue
        if name in _DEFAULTS and value == _DEFAULTS[name]:
            continue
        reasons.append(name)
    return reasons


def _queue_name(queue: Any) -> Any:
    return getattr(queue, "name", queue)


def _absolute_expires(expires: Any, now: datetime) -> Any:
    if isinstance(expires, numbers.Real) and not isinstance(expires, bool):
        return now + timedelta(seconds=float(expires))
    return expires


def carried_options(options: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The options to store with the job, in the form ``JobSpec`` validates."""
    carried = {k: v for k, v in options.items() if k in ROUTING_OPTIONS and v is not None}
    if "queue" in carried:
        carried["queue"] = _queue_name(carried["queue"])
    if "exchange" in carried:
        carried["exchange"] = _queue_name(carried["exchange"])
    if "expires" in carried:
        carried["expires"] = _absolute_expires(carried["expires"], now)
    for name in ("link", "link_error"):
        if name in carried:
            carried[name] = _signatures(carried[name])
    return carried


def _signatures(value: Any) -> Any:
    """Signatures are dicts; a list of them stays a list. Celery rebuilds them on the worker."""
    if isinstance(value, (list, tuple)):
        return [dict(v) for v in value]
    return dict(value)
