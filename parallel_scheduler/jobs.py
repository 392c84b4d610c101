"""The job model, its validation, and the payload that is serialised once, when a job is accepted.

A payload is strict JSON (no NaN, no pickle) holding everything the dispatcher needs to hand the
job over: ``{"args": [...], "kwargs": {...}, "options": {...}}``. Validation happens before any
write, so bad input changes nothing.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import (
    MAX_INSTANT,
    MIN_INSTANT,
    check_countdown,
    check_instant,
    check_nesting,
    in_range,
    shown,
)
from parallel_scheduler.recurring.firing_ids import check_not_reserved
from storage_adapters import JobRecord, JobState, NewJob, RecurringRecord, validate_job_id
from storage_adapters.errors import InvalidIdentifierError
from storage_adapters.records import MAX_TASK_NAME_LENGTH

__all__ = [
    "NAME_OPTIONS",
    "ROUTING_OPTIONS",
    "Job",
    "JobSpec",
    "StoredCall",
    "check_call",
    "check_task_name",
    "decode_payload",
    "display_instant",
    "due_time",
    "new_job_id",
    "read_payload",
    "utc_datetime",
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
DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024
#: Options that name a place in the broker: a blank queue name, or a name with control characters
#: or stray spaces, would silently route the job somewhere else (or nowhere) when it is released.
NAME_OPTIONS = ("queue", "routing_key", "exchange")
#: ... except that exactly "" is meaningful for these two in AMQP: the default (nameless)
#: exchange, and the routing key of a fanout or headers exchange, which ignores it.
_MAY_BE_EMPTY = frozenset({"routing_key", "exchange"})
#: The payload's one encoding, built once: ``json.dumps`` with any option builds an encoder per
#: call, a measurable part of accepting one job. Its ``encode`` keeps no state between calls.
_PAYLOAD_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def _is_plain_name(value: str) -> bool:
    """True when nothing is wrong with ``value`` as a name (``_name_problem`` is ``None``), in a
    few C calls: a bulk accept checks every job's task name and queue. A printable string's only
    possible whitespace is " " (every other whitespace character is unprintable), so a printable,
    non-empty string with no space at either end has nothing to strip."""
    return value != "" and value.isprintable() and value[0] != " " and value[-1] != " "


def _name_problem(value: str) -> str | None:
    """Why ``value`` cannot name a task or a broker destination, or ``None`` when it can."""
    if _is_plain_name(value):
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
    """True when ``_validate_options`` would return ``options`` copied and unchanged with no
    error: a dict of known options whose only checked ones are plain names (or ``None``). The
    usual options (a queue) take this loop over what is there instead of every check."""
    if type(options) is not dict:
        return False
    for name, value in options.items():
        if name in _UNCHECKED_OPTIONS:
            continue
        if name not in NAME_OPTIONS or not (
            value is None or (type(value) is str and _is_plain_name(value))
        ):
            return False  # priority, expires, headers, an unknown option, or a name to look at
    return True


def _validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
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
    ``limits.MAX_NESTING``). Flat arguments, the usual case, take one type check per value."""
    _check_keys("kwargs", "keyword name", kwargs)
    for value in args:
        if isinstance(value, _CONTAINERS):
            check_nesting("args", args)
            break
    for value in kwargs.values():
        if isinstance(value, _CONTAINERS):
            check_nesting("kwargs", kwargs)
            break


def _not_unicode(job_id: str, body: Mapping[str, Any], exc: UnicodeEncodeError) -> InvalidJobError:
    """The error for a payload that holds a lone surrogate, naming the part that holds it."""
    parts = [name for name, value in body.items() if _unencodable(_PAYLOAD_ENCODER.encode(value))]
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


@dataclass(frozen=True)
class JobSpec:
    """What a caller asks for. ``encode`` validates it and turns it into a storable ``NewJob``.

    Only the task name is positional; everything else is keyword-only, so a call reads as what it
    asks for (``JobSpec("tasks.mail", args=[1], countdown=60)``) and a misplaced argument cannot
    silently become another (an id taken for options, a countdown for an eta).
    """

    task: str
    _: KW_ONLY
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    eta: datetime | float | None = None
    countdown: float | timedelta | None = None

    def encode(self, now: float, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> NewJob:
        """Validate everything, then serialise once; ``now`` is the storage clock's time.

        A bulk accept runs this once per job, and under one GIL its cost is the accept's
        throughput: the usual shapes (a list of args, a dict of kwargs, a caller's id) take
        exact-type checks first, anything else the general ones, in the same order and with the
        same errors.
        """
        task = self.task
        if type(task) is not str or len(task) > MAX_TASK_NAME_LENGTH or not _is_plain_name(task):
            check_task_name(task)  # refuses it, naming the problem (or accepts a str subclass)
        args, kwargs = self.args, self.kwargs
        plain_args = type(args) is list or type(args) is tuple
        if not plain_args and (isinstance(args, (str, bytes)) or not isinstance(args, Sequence)):
            raise InvalidJobError(f"args must be a list or tuple, not {type(args).__name__}")
        plain_kwargs = type(kwargs) is dict
        if not plain_kwargs and not isinstance(kwargs, Mapping):
            raise InvalidJobError(f"kwargs must be a mapping, not {type(kwargs).__name__}")
        countdown = self.countdown
        if (
            self.eta is None
            and (type(countdown) is float or type(countdown) is int)
            and 0 <= countdown <= MAX_INSTANT  # False for NaN, and for an int past any float
            and now + countdown <= MAX_INSTANT  # False for infinity
        ):
            due_at = now + countdown  # what ``due_time`` returns, without its checks' calls
        else:
            due_at = due_time(now, eta=self.eta, countdown=countdown)
        if self.id is None:
            job_id = new_job_id()  # a UUID: valid, and never of the reserved form
        else:
            job_id = self.id
            try:
                validate_job_id(job_id)
            except InvalidIdentifierError as exc:
                raise InvalidJobError(str(exc)) from None
            if "@" in job_id:  # the reserved form has one (see firing_ids)
                check_not_reserved(job_id)
        check_call(args, kwargs)
        # A list, tuple or dict is encoded as given (JSON writes a tuple as a list, and the
        # encoder only reads them); any other sequence or mapping is copied into one first.
        body = {
            "args": args if plain_args else list(args),
            "kwargs": kwargs if plain_kwargs else dict(kwargs),
            "options": _validate_options(self.options),
        }
        try:
            payload = _PAYLOAD_ENCODER.encode(body)
        except (TypeError, ValueError) as exc:
            raise InvalidJobError(
                f"args/kwargs/options of job {job_id!r} are not JSON: {exc}"
            ) from None
        try:
            size = len(payload) if payload.isascii() else len(payload.encode())
        except UnicodeEncodeError as exc:
            raise _not_unicode(job_id, body, exc) from None
        if size > max_payload_bytes:
            raise InvalidJobError(
                f"payload of job {job_id!r} is {size} bytes; the limit is {max_payload_bytes} "
                "(setting max_payload_bytes)"
            )
        return NewJob(job_id, task, payload, due_at, None)  # by position: measurably faster


def decode_payload(payload: str) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """``(args, kwargs, options)`` from a stored payload."""
    body = json.loads(payload)
    return list(body.get("args", [])), dict(body.get("kwargs", {})), dict(body.get("options", {}))


def utc_datetime(epoch: float) -> datetime:
    """Epoch seconds (the storage clock's unit) as the aware UTC datetime callers see."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


def display_instant(epoch: float | None) -> str:
    """A stored instant as text that never fails: ISO-8601 UTC inside the valid range, ``-`` for
    none, else the raw value, flagged (a row written before the range was checked, or by hand)."""
    if epoch is None:
        return "-"
    if in_range(epoch):
        return utc_datetime(epoch).isoformat()
    return f"{epoch!r} (outside the valid range)"


def _shown_instant(name: str, epoch: float, problems: list[str]) -> datetime:
    """``epoch`` as a datetime; out of range (or NaN), clamped into it and noted in ``problems``,
    so that every caller can format, compare and convert it without an ``OverflowError``."""
    if in_range(epoch):
        return utc_datetime(epoch)
    problems.append(f"{name} {display_instant(epoch)}")
    return utc_datetime(MAX_INSTANT if epoch > MAX_INSTANT else MIN_INSTANT)


def read_payload(
    payload: str, problems: list[str]
) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """``decode_payload`` for showing a stored row: an unreadable payload is an empty call and
    a note in ``problems``, never an exception (one bad row must not break a listing)."""
    try:
        return decode_payload(payload)
    # not JSON, not the expected shape, or nested deeper than the decoder goes
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        problems.append(f"payload is unreadable ({type(exc).__name__}: {exc})")
        return [], {}, {}


@dataclass(frozen=True)
class StoredCall:
    """What a stored job and a stored recurring job both show: the id, the task, and the call's
    arguments and options decoded from the payload (see ``read_payload``)."""

    id: str
    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]

    @staticmethod
    def read_call(record: JobRecord | RecurringRecord, problems: list[str]) -> dict[str, Any]:
        """These fields of ``record`` as keyword arguments; see ``read_payload``."""
        args, kwargs, options = read_payload(record.payload, problems)
        return {
            "id": record.id,
            "task": record.task,
            "args": args,
            "kwargs": kwargs,
            "options": options,
        }

    def _call_dict(self) -> dict[str, Any]:
        """The start of ``to_dict``, the same for both."""
        return {
            "id": self.id,
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "options": self.options,
        }


@dataclass(frozen=True)
class Job(StoredCall):
    """A stored job as callers see it: decoded arguments and aware UTC datetimes.

    Reading a row never fails, so one bad row (written before the range was checked, or by
    hand) cannot break ``list`` or ``get`` for everyone: ``problem`` then says what is wrong,
    the datetimes are clamped into the valid range, ``due_at_epoch`` keeps the stored due time
    and ``raw_payload`` the payload that could not be decoded.
    """

    due_at: datetime
    state: JobState
    attempts: int
    created_at: datetime
    updated_at: datetime
    last_error: str | None
    problem: str | None = None
    due_at_epoch: float | None = None
    raw_payload: str | None = None

    @classmethod
    def from_record(cls, record: JobRecord) -> Job:
        problems: list[str] = []
        call = cls.read_call(record, problems)
        unreadable = bool(problems)
        return cls(
            **call,
            due_at=_shown_instant("due_at", record.due_at, problems),
            state=record.state,
            attempts=record.attempts,
            created_at=_shown_instant("created_at", record.created_at, problems),
            updated_at=_shown_instant("updated_at", record.updated_at, problems),
            last_error=record.last_error,
            problem="; ".join(problems) or None,
            due_at_epoch=record.due_at,
            raw_payload=record.payload if unreadable else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; a flagged row carries ``problem``, its stored due time (a string when it
        is not a finite number, which strict JSON cannot hold) and any unreadable payload."""
        shown: dict[str, Any] = {
            **self._call_dict(),
            "due_at": self.due_at.isoformat(),
            "state": self.state.value,
            "attempts": self.attempts,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "last_error": self.last_error,
            "problem": self.problem,
        }
        if self.problem is not None:
            raw = self.due_at_epoch
            shown["due_at_epoch"] = raw if raw is None or math.isfinite(raw) else repr(raw)
            shown["raw_payload"] = self.raw_payload
        return shown
