"""What a job must be before it is stored: a task name, routing options the broker can carry, a
due time in range and a call that is JSON, checked before any write so bad input changes
nothing. ``JobSpec.encode`` (jobs.py) runs these; the command line and the dashboard run them on
what they parse, so every entry point refuses the same input with the same words.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import (
    check_countdown,
    check_instant,
    check_nesting,
    shown,
)
from storage_adapters.records import MAX_TASK_NAME_LENGTH

__all__ = [
    "NAME_OPTIONS",
    "ROUTING_OPTIONS",
    "check_call",
    "check_task_name",
    "due_time",
    "is_plain_name",
    "new_job_id",
    "not_unicode",
    "validate_options",
]

#: Options carried to the worker system unchanged (Celery's names for them).
ROUTING_OPTIONS = frozenset(
    {
        "queue",
        "routing_key",
        "exchange",
        "priority",
        "headers",
        "expires",
        "link",
        "link_error",
        "time_limit",
        "soft_time_limit",
        "ignore_result",
        "shadow",
        "serializer",
        "compression",
        "delivery_mode",
        "chain",  # the rest of a chain (JSON signatures), as Celery sends it in the body
        "reply_to",  # the caller's reply queue (the rpc:// result backend answers there)
    }
)
#: Options that name a place in the broker: a blank queue name, or a name with control characters
#: or stray spaces, would silently route the job somewhere else (or nowhere) when it is released.
NAME_OPTIONS = ("queue", "routing_key", "exchange")
#: ... except that exactly "" is meaningful for these two in AMQP: the default (nameless)
#: exchange, and the routing key of a fanout or headers exchange, which ignores it.
_MAY_BE_EMPTY = frozenset({"routing_key", "exchange"})


def is_plain_name(value: str) -> bool:
    """True when nothing is wrong with ``value`` as a name (``_name_problem`` is ``None``), in a
    few C calls: a bulk accept checks every job's task name and queue. A printable string's only
    possible whitespace is " " (every other whitespace character is unprintable), so a printable,
    non-empty string with no space at either end has nothing to strip."""
    return value != "" and value.isprintable() and value[0] != " " and value[-1] != " "


def _name_problem(value: str) -> str | None:
    """Why ``value`` cannot name a task or a broker destination, or ``None`` when it can."""
    if is_plain_name(value):
        return None
    if not value.strip():
        return "is empty or blank"
    if value != value.strip():
        return "has leading or trailing whitespace"
    if not value.isprintable():  # one C call for the usual case; the scan only to name it
        bad = next(c for c in value if not c.isprintable())
        return f"contains the control character {bad!r}"
    return None


def check_task_name(task: object) -> str:
    """A task name as Celery will see it: 1-255 printable characters, no surrounding spaces
    (a newline in a name would also split every line-based log and CLI listing)."""
    if not isinstance(task, str):
        raise InvalidJobError(f"task name must be a non-empty string, not {task!r}")
    problem = _name_problem(task)
    if problem is not None:
        raise InvalidJobError(f"task name {task!r} {problem}")
    if len(task) > MAX_TASK_NAME_LENGTH:
        raise InvalidJobError(f"task name is longer than {MAX_TASK_NAME_LENGTH} characters")
    return task


def _check_name(option: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidJobError(f"{option} must be a string, not {value!r}")
    if value == "" and option in _MAY_BE_EMPTY:
        return
    problem = _name_problem(value)
    if problem is not None:
        raise InvalidJobError(f"{option} {value!r} {problem}")


def new_job_id() -> str:
    return str(uuid.uuid4())


def _epoch(name: str, moment: datetime) -> float:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidJobError(
            f"{name} {moment.isoformat()} has no time zone; pass an aware datetime "
            "(for example datetime.now(timezone.utc) + timedelta(minutes=5))"
        )
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):  # an offset that pushes it past what datetime holds
        raise InvalidJobError(
            f"{name} {moment.isoformat()} is outside the valid range of instants"
        ) from None


def due_time(
    now: float, *, eta: datetime | float | None = None, countdown: float | timedelta | None = None
) -> float:
    """The epoch second a job falls due: ``eta`` (absolute) or ``countdown`` seconds from ``now``.

    Both are checked against the one documented range (``limits``) before anything is written,
    so a due time that could not be shown as a date later is refused here, naming the value. An
    eta in the past (inside the range) means due now.
    """
    if eta is not None and countdown is not None:
        raise InvalidJobError("pass eta or countdown, not both")
    if countdown is not None:
        seconds = countdown.total_seconds() if isinstance(countdown, timedelta) else countdown
        return check_countdown("countdown", seconds, now)
    if eta is None:
        return now
    return _instant("eta", eta)


def _instant(name: str, value: object) -> float:
    """An aware datetime or epoch seconds inside the range; the error quotes what was passed."""
    if isinstance(value, datetime):
        return check_instant(f"{name} {value.isoformat()} =", _epoch(name, value))
    return check_instant(name, value)


#: Options passed on as given, whatever their value.
_UNCHECKED_OPTIONS = ROUTING_OPTIONS - {"priority", "expires", "headers", *NAME_OPTIONS}


def _plain_options(options: Mapping[str, Any]) -> bool:
    """True when ``validate_options`` would return ``options`` copied and unchanged with no
    error: a dict of known options whose only checked ones are plain names (or ``None``). The
    usual options (a queue) take this loop over what is there instead of every check."""
    if type(options) is not dict:
        return False
    for name, value in options.items():
        if name in _UNCHECKED_OPTIONS:
            continue
        if name not in NAME_OPTIONS or not (
            value is None or (type(value) is str and is_plain_name(value))
        ):
            return False  # priority, expires, headers, an unknown option, or a name to look at
    return True


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    if _plain_options(options):
        return dict(options)
    unknown = set(options) - ROUTING_OPTIONS
    if unknown:
        raise InvalidJobError(
            f"unknown option(s) {sorted(unknown)}; supported: {sorted(ROUTING_OPTIONS)}"
        )
    clean = dict(options)
    priority = clean.get("priority")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 255
    ):
        raise InvalidJobError(f"priority must be an integer 0-255, not {priority!r}")
    if clean.get("expires") is not None:
        clean["expires"] = _instant("expires", clean["expires"])
    for name in NAME_OPTIONS:
        if clean.get(name) is not None:
            _check_name(name, clean[name])
    headers = clean.get("headers")
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise InvalidJobError(f"headers must be a mapping, not {type(headers).__name__}")
        _check_keys("headers", "header name", headers)
    return clean


def _check_keys(field: str, what: str, mapping: Mapping[Any, Any]) -> None:
    """Every key of ``mapping`` a non-empty string: a message's headers and a call's keyword
    arguments are carried by name, and JSON would turn ``1`` into ``"1"`` without a word."""
    for key in mapping:
        if not isinstance(key, str) or not key:
            raise InvalidJobError(
                f"{field}: every {what} must be a non-empty string, not {shown(key)}"
            )


#: The containers JSON nests (others are not JSON, and the encoder refuses them by name).
_CONTAINERS = (list, tuple, dict)


def check_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """The arguments' shape the payload's JSON cannot check: keyword names, and nesting (see
    ``ranges.MAX_NESTING``). Flat arguments, the usual case, take one type check per value."""
    _check_keys("kwargs", "keyword name", kwargs)
    for value in args:
        if isinstance(value, _CONTAINERS):
            check_nesting("args", args)
            break
    for value in kwargs.values():
        if isinstance(value, _CONTAINERS):
            check_nesting("kwargs", kwargs)
            break


def not_unicode(job_id: str, body: Mapping[str, Any], exc: UnicodeEncodeError) -> InvalidJobError:
    """The error for a payload that holds a lone surrogate, naming the part that holds it."""
    parts = [
        name for name, value in body.items() if _unencodable(json.dumps(value, ensure_ascii=False))
    ]
    part = parts[0] if parts else "args/kwargs/options"
    bad = exc.object[exc.start : exc.end]
    return InvalidJobError(
        f"{part} of job {job_id!r} hold {shown(bad)}, a lone surrogate: text must be valid "
        "Unicode to be sent as UTF-8"
    )


def _unencodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
