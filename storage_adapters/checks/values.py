"""Input checks every adapter runs before it writes, so bad input is refused the same way
everywhere and a bad job cannot leave part of a batch stored."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from math import isfinite as _isfinite
from typing import TypeVar

from storage_adapters.errors import InvalidArgumentError, InvalidRecordError
from storage_adapters.records import (
    MAX_TASK_NAME_LENGTH,
    Firing,
    ManualFiring,
    NewJob,
    NewRecurring,
    PlannedFiring,
    validate_job_id,
)

__all__ = [
    "MAX_COUNT",
    "RECOVERED_REASON",
    "SAVE_MODES",
    "check_firing",
    "check_manual_firing",
    "check_new_jobs",
    "check_new_recurring",
    "check_new_recurrings",
    "check_planned_firings",
    "check_save_mode",
    "epoch_seconds",
    "error_text",
    "flag",
    "non_negative_offset",
    "optional_epoch_seconds",
    "positive_count",
    "positive_seconds",
    "stored_seconds",
]

#: ``last_error`` of a job whose claim ran out before it was marked enqueued.
RECOVERED_REASON = "claim lease expired before the job was marked enqueued"


E = TypeVar("E", bound=Enum)


def member(kinds: type[E], value: object, refusal: str) -> E:
    """``value`` as a member of ``kinds`` (a member or its value), or ``InvalidArgumentError``
    saying ``refusal`` with the value shown (``"unknown job state {!r}"``)."""
    try:
        return kinds(value)
    except ValueError:
        raise InvalidArgumentError(refusal.format(value)) from None


def epoch_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgumentError(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)


def stored_seconds(value: object) -> float:
    """A time column as read back, never an error: NaN when it holds no number (a row written by
    hand or by a broken client), so one bad row cannot stop every listing; the core flags it."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def error_text(error: str) -> str:
    """A ``last_error`` given to ``back_off`` or ``fail``: a string."""
    if not isinstance(error, str):
        raise InvalidArgumentError(f"error must be a str, not {error!r}")
    return error


def positive_seconds(name: str, value: float) -> float:
    if epoch_seconds(name, value) <= 0:
        raise InvalidArgumentError(f"{name} must be positive, not {value!r}")
    return float(value)


#: The largest limit, offset or pool size: an integer every backend takes as it is (PostgreSQL
#: refuses a LIMIT past a bigint with its own error, Redis's Lua reads 10**20 as no integer).
MAX_COUNT = 2**31 - 1


def positive_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_COUNT:
        raise InvalidArgumentError(
            f"{name} must be an integer from 1 to {MAX_COUNT}, not {_short(value)}"
        )
    return value


def non_negative_offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_COUNT:
        raise InvalidArgumentError(
            f"offset must be an integer from 0 to {MAX_COUNT}, not {_short(offset)}"
        )
    return offset


def _short(value: object) -> str:
    """``value`` for a message: its ``repr``, cut to 60 characters (an int of 5,000 digits
    cannot even be turned into text)."""
    try:
        text = repr(value)
    except ValueError:
        return f"<an {type(value).__name__} too long to show>"
    return text if len(text) <= 60 else f"{text[:57]}..."


def flag(name: str, value: bool) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be a bool, not {value!r}")
    return value


SAVE_MODES = ("create", "update", "upsert")


def check_save_mode(mode: str) -> None:
    if mode not in SAVE_MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(SAVE_MODES)}, not {mode!r}")


def check_new_jobs(jobs: Sequence[NewJob]) -> None:
    """Every job of one ``add_jobs`` call, before any is written. A bulk accept runs this per
    job, so the usual case takes exact-type checks first; anything else gets the general check
    with its error, in the same order. A job with a ``unique_key`` is refused: those go through
    ``add_unique_job``, which checks the rest of one as this does (``check_unique_new_job``)."""
    seen: set[str] = set()
    for job in jobs:
        job_id, task, envelope, due_at = job.id, job.task, job.envelope, job.due_at
        validate_job_id(job_id)
        if job_id in seen:
            raise InvalidRecordError(f"job id {job_id!r} appears twice in one add_jobs call")
        seen.add(job_id)
        if not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME_LENGTH:
            raise InvalidRecordError(
                f"job {job_id!r} needs a task name of 1-{MAX_TASK_NAME_LENGTH} chars"
            )
        if not isinstance(job.payload, str):
            raise InvalidRecordError(f"job {job_id!r} payload must be a str")
        if envelope is not None and (not isinstance(envelope, str) or not envelope):
            raise InvalidRecordError(f"job {job_id!r} envelope must be a non-empty str or None")
        queue = job.queue
        if queue is not None and (
            not isinstance(queue, str) or not 0 < len(queue) <= MAX_TASK_NAME_LENGTH
        ):
            raise InvalidRecordError(
                f"job {job_id!r} queue must be None or a str of 1-{MAX_TASK_NAME_LENGTH} chars"
            )
        if type(due_at) is not float or not _isfinite(due_at):
            epoch_seconds("due_at", due_at)
        if job.unique_key is not None:  # its key's holder decides: one job per call
            raise InvalidRecordError(
                f"job {job_id!r} has a unique_key: store it with add_unique_job, not add_jobs"
            )


def optional_epoch_seconds(name: str, value: float | None) -> float | None:
    """``None`` (no next run: the schedule ended; no last run yet) or a finite time."""
    return None if value is None else epoch_seconds(name, value)


def _task_name(owner: str, task: object) -> None:
    if not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME_LENGTH:
        raise InvalidRecordError(f"{owner} needs a task name of 1-{MAX_TASK_NAME_LENGTH} chars")


def check_new_recurring(recurring: NewRecurring) -> None:
    owner = f"recurring job {validate_job_id(recurring.id)!r}"
    _task_name(owner, recurring.task)
    for name in ("payload", "schedule"):
        if not isinstance(getattr(recurring, name), str):
            raise InvalidRecordError(f"{owner}: {name} must be a str")
    if not isinstance(recurring.enabled, bool):
        raise InvalidRecordError(f"{owner}: enabled must be a bool")
    optional_epoch_seconds("next_run_at", recurring.next_run_at)


def check_firing(version: int, firing: Firing) -> None:
    _check_firing_fields(version, firing)
    check_new_jobs(firing.jobs)


def _check_firing_fields(version: int, firing: Firing) -> None:
    """A firing's own fields (not its jobs)."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidArgumentError(f"version must be an integer, not {version!r}")
    if not isinstance(firing.history, str):
        raise InvalidRecordError("firing history must be a str")
    optional_epoch_seconds("next_run_at", firing.next_run_at)
    optional_epoch_seconds("last_run_at", firing.last_run_at)


def check_planned_firings(planned: Sequence[PlannedFiring]) -> None:
    """Every firing of one ``fire_recurring_many`` call, before any is written: each checked as
    ``check_firing`` checks one, no recurring job twice, and no firing job id twice."""
    seen: set[str] = set()
    for item in planned:
        if not isinstance(item, PlannedFiring):
            raise InvalidRecordError(f"a PlannedFiring is expected, not {type(item).__name__}")
        validate_job_id(item.recurring_id)
        if item.recurring_id in seen:
            raise InvalidRecordError(
                f"recurring job {item.recurring_id!r} appears twice in one fire_recurring_many call"
            )
        seen.add(item.recurring_id)
        _check_firing_fields(item.version, item.firing)
    check_new_jobs([job for item in planned for job in item.firing.jobs])


def check_new_recurrings(recurrings: Sequence[NewRecurring]) -> None:
    """Every recurring job of one ``save_recurring_many`` call, before any is written."""
    seen: set[str] = set()
    for recurring in recurrings:
        if not isinstance(recurring, NewRecurring):
            raise InvalidRecordError(f"a NewRecurring is expected, not {type(recurring).__name__}")
        check_new_recurring(recurring)
        if recurring.id in seen:
            raise InvalidRecordError(
                f"recurring job {recurring.id!r} appears twice in one save_recurring_many call"
            )
        seen.add(recurring.id)


def check_manual_firing(version: int, firing: ManualFiring) -> None:
    """A trigger, checked as ``check_firing`` checks a firing (it always has a last run)."""
    epoch_seconds("last_run_at", firing.last_run_at)
    check_firing(version, Firing(None, firing.last_run_at, firing.history, (firing.job,)))
