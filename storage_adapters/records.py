"""The records the storage contract speaks in, and the checks on the identifiers they carry.

Time is a float of seconds since the Unix epoch (UTC) read from the storage server's clock; a
record is plain data, so every adapter builds and returns the same ones.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Literal

from storage_adapters.calendar_records import CalendarRecord
from storage_adapters.errors import InvalidIdentifierError
from storage_adapters.recurring_records import NewRecurring, RecurringRecord

__all__ = [
    "MAX_JOB_ID_LENGTH",
    "MAX_TASK_NAME_LENGTH",
    "CalendarRecord",
    "ClaimedJob",
    "Firing",
    "InstanceRecord",
    "JobQuery",
    "JobRecord",
    "JobState",
    "LockLease",
    "ManualFiring",
    "NewJob",
    "NewRecurring",
    "OutcomeEvent",
    "OutcomeQuery",
    "OutcomeState",
    "PauseKind",
    "PauseRecord",
    "RateLimitRecord",
    "RecurringRecord",
    "Reservation",
    "SaveMode",
    "UniqueAdd",
    "UniqueConflict",
    "check_key_part",
    "validate_job_id",
    "validate_lock_name",
    "validate_prefix",
]

MAX_JOB_ID_LENGTH = 200
#: What a unique job whose key is held does: keep the holder, or move it (``UniqueJobStore``).
UniqueConflict = Literal["keep", "replace"]
#: create: only a new id; update: only an existing id; upsert: either.
SaveMode = Literal["create", "update", "upsert"]
MAX_TASK_NAME_LENGTH = 255
_PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
_LOCK_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


class JobState(str, enum.Enum):
    """Where a job is in its life. Only ``SCHEDULED`` jobs are due; terminal states never change.
    ``FAILED`` is a job set aside because it could not be sent after a bounded number of
    attempts: not terminal, since ``reschedule`` makes it ``SCHEDULED`` again. ``HELD`` is a
    scheduled job whose task or queue is paused (``PauseStore``): it keeps its due time, is
    never due, and becomes ``SCHEDULED`` again when no pause holds it."""

    SCHEDULED = "scheduled"
    CLAIMED = "claimed"
    ENQUEUED = "enqueued"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"
    HELD = "held"

    @property
    def is_terminal(self) -> bool:
        """Whether a job in this state is done with: handed to the broker, cancelled or expired
        (``FAILED`` is not: it can be rescheduled)."""
        return self in (JobState.ENQUEUED, JobState.CANCELLED, JobState.EXPIRED)


@dataclass(frozen=True, slots=True)
class _JobFields:
    """What every form of a job carries (as accepted, as stored, as claimed): one definition,
    so the three records cannot drift apart on these fields' names, types or order."""

    id: str
    task: str
    payload: str
    due_at: float


@dataclass(frozen=True, slots=True)
class NewJob(_JobFields):
    """A job as accepted: its id doubles as the idempotency key.

    ``envelope`` is optional: the job's broker message, built once at accept time by a
    dispatcher that can (``<list key>\n<message>`` for a Redis-list broker), so releasing the
    job costs no serialisation. Storage keeps it opaque and hands it back with the claim; the
    format's codec is ``parallel_scheduler/delayed/envelopes.py`` (``encode_envelope``/
    ``decode_envelope``), and ``lua/release_to_lists.lua`` splits it the same way on the server.

    ``queue`` is the queue the job will be sent to, when the accepting client knows it (its
    ``queue`` option, or the Celery app's routes): a paused queue (``PauseStore``) holds the jobs
    stored with its name. ``None`` means unknown; only a pause of its task holds such a job.

    ``unique_key`` makes the job unique per task while it waits to be released
    (``UniqueJobStore.add_unique_job``; ``add_jobs`` refuses it).
    """

    envelope: str | None = None
    queue: str | None = None
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class JobRecord(_JobFields):
    """A stored job as read back. ``updated_at`` is when its state last changed."""

    state: JobState
    attempts: int
    created_at: float
    updated_at: float
    last_error: str | None = None
    queue: str | None = None
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Which jobs one page of ``list_jobs_page`` (``BrowseStore``) walks, in ``(due_at, id)``
    order: every filter given must hold (``None`` means any). ``due_from`` and ``due_to`` are
    inclusive bounds on ``due_at``; ``task`` matches exactly. ``after`` is the ``(due_at, id)``
    of the last row of the previous page: the page starts strictly after it (keyset pagination,
    so a page costs its own size wherever it is). Adapters check it and refuse bad fields by name
    (``browse.check_job_query``).

    The text filters compare characters exactly, case included, on every backend (no wildcard:
    ``%``, ``_`` and ``*`` are themselves): ``id_prefix`` and ``task_prefix`` keep the jobs whose
    id or task starts with them, ``error_contains`` those whose ``last_error`` contains it. Only
    state, due range and keyset bound the walk by an index; the text filters (and ``task``) are
    checked on the rows walked, so a rare match can mean a walk of every job in the state (an SQL
    store may read a selective id prefix from its primary key instead: ``sql/browse.py``)."""

    state: JobState | None = None
    task: str | None = None
    due_from: float | None = None
    due_to: float | None = None
    after: tuple[float, str] | None = None
    id_prefix: str | None = None
    task_prefix: str | None = None
    error_contains: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimedJob(_JobFields):
    """A job this claimer holds under ``token`` until ``lease_until`` (storage clock)."""

    attempts: int
    token: int
    envelope: str | None = None
    #: The queue it was stored with (``NewJob.queue``), for the rate limits of queues.
    queue: str | None = None
    #: The rate-limit slot it was last given back for (``RateLimitStore.defer``), if any: while
    #: that is still its due time, the slot is its own and it is sent without another.
    slot_at: float | None = None


@dataclass(frozen=True, slots=True)
class Firing:
    """What one firing of a recurring job writes, atomically with the firing jobs themselves."""

    next_run_at: float | None
    last_run_at: float | None
    history: str
    jobs: tuple[NewJob, ...]


@dataclass(frozen=True, slots=True)
class PlannedFiring:
    """One recurring job's firing in a batch (``fire_recurring_many``): the job, the version
    its firing was planned from (the compare-and-set), and what the firing writes."""

    recurring_id: str
    version: int
    firing: Firing


@dataclass(frozen=True, slots=True)
class ManualFiring:
    """What a manual trigger of a recurring job writes, atomically with its one firing job: its
    last run and history, never its next run (the schedule's ticks are not moved)."""

    last_run_at: float
    history: str
    job: NewJob


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """One scheduler process as it last reported itself (liveness, ``InstanceStore``).

    ``heartbeat_at`` is stamped by storage (its clock) on every register or heartbeat, so
    "how long since" is measured on one clock whichever host asks. ``details`` is JSON text the
    scheduler owns (its last passes, the locks it holds, its settings): storage only keeps it.
    """

    id: str
    host: str
    pid: int
    version: str
    started_at: float
    heartbeat_at: float
    details: str


class OutcomeState(str, enum.Enum):
    """What a Celery worker did with a released job (``OutcomeStore``), in the order it happens:
    received from the broker, started, then one final outcome. ``RETRIED`` is final for that run:
    the retry runs again under the same task id (or as a stored retry, its own job)."""

    RECEIVED = "received"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRIED = "retried"
    REVOKED = "revoked"

    @property
    def is_final(self) -> bool:
        """Whether this outcome ends a run (the outcome pages and counts list only these)."""
        return self not in (OutcomeState.RECEIVED, OutcomeState.STARTED)


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    """One state change of a released job on a worker (``OutcomeStore``).

    ``at`` is the worker's clock (epoch seconds), not storage's: the worker saw it happen.
    ``worker`` is the worker's host name, ``runtime`` the seconds the task ran (final outcomes),
    ``error`` the exception type and shortened message (failed, retried), ``retry_id`` the job id
    of the stored retry a retry became, when the plugin stored it. ``task`` is the task name.
    """

    job_id: str
    task: str
    state: OutcomeState
    at: float
    worker: str | None = None
    runtime: float | None = None
    error: str | None = None
    retry_id: str | None = None


@dataclass(frozen=True, slots=True)
class OutcomeQuery:
    """Which final outcomes one page of ``outcomes_page`` walks, newest first by ``(at, job_id)``:
    of one final ``state`` or all, of one ``task`` or all. ``before`` is the ``(at, job_id)`` of
    the last row of the previous page: the page starts strictly before it (keyset pagination)."""

    state: OutcomeState | None = None
    task: str | None = None
    before: tuple[float, str] | None = None


@dataclass(frozen=True, slots=True)
class LockLease:
    """A held distributed lock.

    ``token`` is the fencing token: it grows with every acquisition of the lock, so storage can
    refuse a write from a holder whose lease ran out while it was stalled and whose lock has since
    been taken by someone else. ``expires_at`` is on the storage clock.
    """

    name: str
    owner: str
    token: int
    expires_at: float


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is safe as an SQL identifier part and a Redis key part."""
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise InvalidIdentifierError(
            f"invalid prefix {prefix!r}: use 1-40 characters of letters, digits and '_', "
            "starting with a letter or '_'"
        )
    return prefix


def validate_lock_name(name: str) -> str:
    if not isinstance(name, str) or not _LOCK_NAME_RE.match(name):
        raise InvalidIdentifierError(
            f"invalid lock name {name!r}: use 1-100 characters of letters, digits and '_.:-'"
        )
    return name


def check_key_part(what: str, value: str, limit: int) -> str:
    """An id that becomes part of a Redis key (``what``: "job id", "instance id"): a non-empty
    string of at most ``limit`` characters, printable, without whitespace."""
    # A bulk accept checks every id: the usual case in C calls first. A printable string's only
    # possible whitespace is " " (every other whitespace character is unprintable).
    if (
        isinstance(value, str)
        and 0 < len(value) <= limit
        and value.isprintable()
        and " " not in value
    ):
        return value
    if not isinstance(value, str) or not value:
        raise InvalidIdentifierError(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise InvalidIdentifierError(
            f"{what} is {len(value)} characters long; the limit is {limit}"
        )
    if not value.isprintable() or any(c.isspace() for c in value):
        raise InvalidIdentifierError(f"{what} {value!r} has whitespace or unprintable characters")
    return value


def validate_job_id(job_id: str) -> str:
    """Job ids become Redis keys and Celery task ids: printable, no spaces, bounded length."""
    if (
        type(job_id) is str
        and 0 < len(job_id) <= MAX_JOB_ID_LENGTH
        and job_id.isprintable()
        and " " not in job_id
    ):
        return job_id  # ``check_key_part``'s usual case, without its calls (see there)
    return check_key_part("job id", job_id, MAX_JOB_ID_LENGTH)


class PauseKind(str, enum.Enum):
    """What a pause or a rate limit names: a queue (the jobs stored with that ``queue``) or a
    task name."""

    QUEUE = "queue"
    TASK = "task"


@dataclass(frozen=True, slots=True)
class PauseRecord:
    """One pause in force (``PauseStore``): who paused what, when (storage clock), and why."""

    kind: PauseKind
    name: str
    note: str
    paused_by: str
    paused_at: float


@dataclass(frozen=True, slots=True)
class RateLimitRecord:
    """One rate limit in force (``RateLimitStore``): at most ``count`` releases of the jobs of
    queue or task ``name`` per ``period`` seconds, ``burst`` of them at once after a quiet spell;
    who set it and when (storage clock). ``free_at`` is when the next job of it may go
    (``None``: now): later than now while released jobs wait for it."""

    kind: PauseKind
    name: str
    count: int
    period: float
    burst: int
    set_by: str
    set_at: float
    free_at: float | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """What ``reserve_release_slots`` answered: the storage clock when it was made, and for each
    job asked for, in order, the instant it may be released (``<= now``: at once)."""

    now: float
    slots: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class UniqueAdd:
    """What ``add_unique_job`` did: ``job_id`` is the job that holds the key now (the new one,
    or the holder), ``created`` whether the new job was stored, ``replaced`` whether the holder
    was moved to the new job's time and payload."""

    job_id: str
    created: bool
    replaced: bool
