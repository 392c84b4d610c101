"""The job model and the payload that is serialised once, when a job is accepted.

A payload is strict JSON (no NaN, no pickle) holding everything the dispatcher needs to hand the
job over: ``{"args": [...], "kwargs": {...}, "options": {...}}``. Validation happens before any
write (job_checks.py), so bad input changes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.firing_ids import check_not_reserved
from parallel_scheduler.jitter import check_jitter, jitter_offset
from parallel_scheduler.job_checks import (
    check_call,
    check_task_name,
    due_time,
    is_plain_name,
    new_job_id,
    not_unicode,
    validate_options,
)
from parallel_scheduler.queues import options_queue
from parallel_scheduler.ranges import (
    MAX_INSTANT,
    MIN_INSTANT,
    in_range,
    lands_too_late,
    shown,
)
from parallel_scheduler.unique_checks import check_unique_options
from storage_adapters import JobRecord, JobState, NewJob, RecurringRecord, validate_job_id
from storage_adapters.errors import InvalidIdentifierError
from storage_adapters.records import MAX_TASK_NAME_LENGTH
from storage_adapters.sharding import unique_job_id

__all__ = [
    "Job",
    "JobSpec",
    "StoredCall",
    "decode_payload",
    "display_instant",
    "read_payload",
    "utc_datetime",
]


#: The largest payload a job may have, in bytes of UTF-8 JSON (``max_payload_bytes`` setting).
DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024
#: The payload's one encoding, built once: ``json.dumps`` with any option builds an encoder per
#: call, a measurable part of accepting one job. Its ``encode`` keeps no state between calls.
_PAYLOAD_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class JobSpec:
    """What a caller asks for. ``encode`` validates it and turns it into a storable ``NewJob``.

    Only the task name is positional; everything else is keyword-only, so a call reads as what it
    asks for (``JobSpec("tasks.mail", args=[1], countdown=60)``) and a misplaced argument cannot
    silently become another (an id taken for options, a countdown for an eta).

    :param task: the task name the job is sent as (printable, no leading or trailing space).
    :param args: the positional arguments, a list or tuple of JSON values.
    :param kwargs: the keyword arguments, a mapping of names to JSON values.
    :param options: the send options (``queue``, ``routing_key``, ``exchange``, ``priority``,
        ``headers``, ``expires``, ...), passed to the broker as ``send_task`` takes them.
    :param id: the job id, also the Celery task id; an idempotency key (a random UUID when
        ``None``).
    :param eta: when the job is due: a timezone-aware ``datetime`` or epoch seconds (an eta in
        the past means due now).
    :param countdown: seconds (or a ``timedelta``) from now, on the storage server's clock;
        give ``eta`` or ``countdown``, not both (neither: due now).
    :param jitter: seconds (or a ``timedelta``): the due time moves later by an offset in
        ``[0, jitter)`` of the id and the due time (``jitter.py``), the same on every retry.
    :param unique_key: at most one scheduled job per ``(task, unique_key)`` (1-255 printable
        characters); ``None``: not a unique job.
    :param on_conflict: what a unique job does when its key is held: ``"keep"`` the holder
        (the default) or ``"replace"`` its due time and payload.

    Nothing is checked until ``encode`` runs (``Client.schedule_many`` runs it for every spec
    before it stores any).

    Example::

        client.schedule_many(
            JobSpec("tasks.send_reminder", args=[user_id], countdown=3600, id=f"remind-{user_id}")
            for user_id in (1, 2, 3)
        )
    """

    task: str
    _: KW_ONLY
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    eta: datetime | float | None = None
    countdown: float | timedelta | None = None
    jitter: float | timedelta | None = None
    unique_key: str | None = None
    on_conflict: Literal["keep", "replace"] = "keep"

    def encode(
        self, now: float, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, shards: int = 1
    ) -> NewJob:
        """Validate everything, then serialise once; ``now`` is the storage clock's time.

        :param now: the storage server's time, epoch seconds; a ``countdown`` counts from it.
        :param max_payload_bytes: the largest serialised arguments and options allowed.
        :param shards: the store's shard count: a unique job's generated id falls in its key's
            shard (``sharding.unique_job_id``).
        :returns: the job as storage takes it, its payload serialised as JSON.
        :raises InvalidJobError: a task name, argument, option, id or due time is not allowed
            (the message names which); nothing is written.

        A bulk accept runs this once per job, and under one GIL its cost is the accept's
        throughput: the usual shapes (a list of args, a dict of kwargs, a caller's id) take
        exact-type checks first, anything else the general ones, in the same order and with the
        same errors.
        """
        task = self.task
        if type(task) is not str or len(task) > MAX_TASK_NAME_LENGTH or not is_plain_name(task):
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
        unique_key = None
        if self.unique_key is not None or self.on_conflict != "keep":
            unique_key = check_unique_options(self.unique_key, self.on_conflict)
        job_id = self._job_id(task, unique_key, shards)
        if self.jitter is not None:
            due_at = _jittered(job_id, due_at, self.jitter)
        check_call(args, kwargs)
        # A list, tuple or dict is encoded as given (JSON writes a tuple as a list, and the
        # encoder only reads them); any other sequence or mapping is copied into one first.
        options = validate_options(self.options)
        body = {
            "args": args if plain_args else list(args),
            "kwargs": kwargs if plain_kwargs else dict(kwargs),
            "options": options,
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
            raise not_unicode(job_id, body, exc) from None
        if size > max_payload_bytes:
            raise InvalidJobError(
                f"payload of job {job_id!r} is {size} bytes; the limit is {max_payload_bytes} "
                "(setting max_payload_bytes)"
            )
        # by position: measurably faster; the queue a paused queue holds it by (queues.py)
        return NewJob(job_id, task, payload, due_at, None, options_queue(options), unique_key)

    def _job_id(self, task: str, unique_key: str | None, shards: int) -> str:
        """The id given (checked), else a new UUID: valid, never of the reserved form, and for
        a unique job in its key's shard."""
        if self.id is None:
            return new_job_id() if unique_key is None else unique_job_id(task, unique_key, shards)
        job_id = self.id
        try:
            validate_job_id(job_id)
        except InvalidIdentifierError as exc:
            raise InvalidJobError(str(exc)) from None
        if "@" in job_id:  # the reserved form has one (see firing_ids)
            check_not_reserved(job_id)
        return job_id


def _jittered(job_id: str, due_at: float, jitter: object) -> float:
    """``due_at`` moved by the job's jitter offset; refused past the valid range."""
    moved = due_at + jitter_offset(job_id, due_at, check_jitter(jitter))
    if moved > MAX_INSTANT:
        raise lands_too_late("jitter", shown(jitter))
    return moved


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

    ``Client.get`` and ``Client.list`` return these. ``id`` is the job id (the Celery task id it
    is sent under), ``task``, ``args``, ``kwargs`` and ``options`` the call; ``state`` a
    ``JobState``; ``attempts`` how many times it was claimed; ``last_error`` why its last send
    failed, if one did; ``queue`` the queue it is sent to, as stored when it was accepted (a
    pause of that queue holds it; ``None``: unknown, Celery's routing picks it at release);
    ``unique_key`` the key it holds for its task, if it is a unique job.

    Example::

        job = client.get(result.job_id)
        if job is not None and job.state is JobState.SCHEDULED:
            print(job.task, job.args, "due", job.due_at.isoformat())
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
    queue: str | None = None
    unique_key: str | None = None

    @classmethod
    def from_record(cls, record: JobRecord) -> Job:
        """The job a storage record holds, decoded; never raises on a bad row (see ``problem``).

        :param record: a job record as a storage adapter returns it.
        """
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
            queue=record.queue,
            unique_key=record.unique_key,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; a flagged row carries ``problem``, its stored due time (a string when it
        is not a finite number, which strict JSON cannot hold) and any unreadable payload."""
        shown: dict[str, Any] = {
            **self._call_dict(),
            "due_at": self.due_at.isoformat(),
            "state": self.state.value,
            "queue": self.queue,
            "unique_key": self.unique_key,
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
