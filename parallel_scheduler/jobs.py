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
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from storage_adapters import JobRecord, JobState, NewJob, validate_job_id
from storage_adapters.base import MAX_TASK_NAME_LENGTH, InvalidIdentifierError

from .errors import InvalidJobError

__all__ = [
    "ROUTING_OPTIONS",
    "Job",
    "JobSpec",
    "decode_payload",
    "due_time",
    "new_job_id",
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
    }
)
DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024


def new_job_id() -> str:
    return str(uuid.uuid4())


def _epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        raise InvalidJobError(
            f"eta {moment.isoformat()} has no time zone; pass an aware datetime "
            "(for example datetime.now(timezone.utc) + timedelta(minutes=5))"
        )
    return moment.timestamp()


def due_time(
    now: float, *, eta: datetime | float | None = None, countdown: float | timedelta | None = None
) -> float:
    """The epoch second a job falls due: ``eta`` (absolute) or ``countdown`` seconds from ``now``.

    An eta in the past means due now; a countdown must be finite and not negative.
    """
    if eta is not None and countdown is not None:
        raise InvalidJobError("pass eta or countdown, not both")
    if countdown is not None:
        seconds = countdown.total_seconds() if isinstance(countdown, timedelta) else countdown
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidJobError(f"countdown must be a number of seconds, not {countdown!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidJobError(f"countdown must be finite and >= 0, not {seconds!r}")
        return now + float(seconds)
    if eta is None:
        return now
    if isinstance(eta, datetime):
        return _epoch(eta)
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta):
        raise InvalidJobError(f"eta must be an aware datetime or epoch seconds, not {eta!r}")
    return float(eta)


def _validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
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
    expires = clean.get("expires")
    if isinstance(expires, datetime):
        clean["expires"] = _epoch(expires)
    elif expires is not None and (
        isinstance(expires, bool)
        or not isinstance(expires, (int, float))
        or not math.isfinite(expires)
    ):
        raise InvalidJobError(
            f"expires must be an aware datetime or epoch seconds, not {expires!r}"
        )
    headers = clean.get("headers")
    if headers is not None and not isinstance(headers, Mapping):
        raise InvalidJobError(f"headers must be a mapping, not {type(headers).__name__}")
    return clean


@dataclass(frozen=True)
class JobSpec:
    """What a caller asks for. ``encode`` validates it and turns it into a storable ``NewJob``."""

    task: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    eta: datetime | float | None = None
    countdown: float | timedelta | None = None

    def encode(self, now: float, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> NewJob:
        """Validate everything, then serialise once; ``now`` is the storage clock's time."""
        if not isinstance(self.task, str) or not self.task.strip():
            raise InvalidJobError("task name must be a non-empty string")
        if len(self.task) > MAX_TASK_NAME_LENGTH:
            raise InvalidJobError(f"task name is longer than {MAX_TASK_NAME_LENGTH} characters")
        if isinstance(self.args, (str, bytes)) or not isinstance(self.args, Sequence):
            raise InvalidJobError(f"args must be a list or tuple, not {type(self.args).__name__}")
        if not isinstance(self.kwargs, Mapping):
            raise InvalidJobError(f"kwargs must be a mapping, not {type(self.kwargs).__name__}")
        due_at = due_time(now, eta=self.eta, countdown=self.countdown)
        job_id = new_job_id() if self.id is None else self.id
        try:
            validate_job_id(job_id)
        except InvalidIdentifierError as exc:
            raise InvalidJobError(str(exc)) from None
        body = {
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "options": _validate_options(self.options),
        }
        try:
            payload = json.dumps(body, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidJobError(
                f"args/kwargs/options of job {job_id!r} are not JSON: {exc}"
            ) from None
        size = len(payload.encode())
        if size > max_payload_bytes:
            raise InvalidJobError(
                f"payload of job {job_id!r} is {size} bytes; the limit is {max_payload_bytes} "
                "(setting max_payload_bytes)"
            )
        return NewJob(id=job_id, task=self.task, payload=payload, due_at=due_at)


def decode_payload(payload: str) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """``(args, kwargs, options)`` from a stored payload."""
    body = json.loads(payload)
    return list(body.get("args", [])), dict(body.get("kwargs", {})), dict(body.get("options", {}))


def utc_datetime(epoch: float) -> datetime:
    """Epoch seconds (the storage clock's unit) as the aware UTC datetime callers see."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


@dataclass(frozen=True)
class Job:
    """A stored job as callers see it: decoded arguments and aware UTC datetimes."""

    id: str
    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    due_at: datetime
    state: JobState
    attempts: int
    created_at: datetime
    updated_at: datetime
    last_error: str | None

    @classmethod
    def from_record(cls, record: JobRecord) -> Job:
        args, kwargs, options = decode_payload(record.payload)
        return cls(
            id=record.id,
            task=record.task,
            args=args,
            kwargs=kwargs,
            options=options,
            due_at=utc_datetime(record.due_at),
            state=record.state,
            attempts=record.attempts,
            created_at=utc_datetime(record.created_at),
            updated_at=utc_datetime(record.updated_at),
            last_error=record.last_error,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "options": self.options,
            "due_at": self.due_at.isoformat(),
            "state": self.state.value,
            "attempts": self.attempts,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "last_error": self.last_error,
        }
