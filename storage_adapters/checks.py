"""Input checks every adapter runs before it writes, so bad input is refused the same way
everywhere and a bad job cannot leave part of a batch stored."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .records import MAX_TASK_NAME_LENGTH, Firing, NewJob, NewRecurring, validate_job_id

__all__ = [
    "RECOVERED_REASON",
    "check_firing",
    "check_new_jobs",
    "check_new_recurring",
    "epoch_seconds",
    "optional_epoch_seconds",
    "positive_count",
    "positive_seconds",
    "stored_seconds",
]

#: ``last_error`` of a job whose claim ran out before it was marked enqueued.
RECOVERED_REASON = "claim lease expired before the job was marked enqueued"


def epoch_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)


def stored_seconds(value: object) -> float:
    """A time column as read back, never an error: NaN when it holds no number (a row written by
    hand or by a broken client), so one bad row cannot stop every listing; the core flags it."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def positive_seconds(name: str, value: float) -> float:
    if epoch_seconds(name, value) <= 0:
        raise ValueError(f"{name} must be positive, not {value!r}")
    return float(value)


def positive_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return value


def check_new_jobs(jobs: Sequence[NewJob]) -> None:
    seen: set[str] = set()
    for job in jobs:
        validate_job_id(job.id)
        if job.id in seen:
            raise ValueError(f"job id {job.id!r} appears twice in one add_jobs call")
        seen.add(job.id)
        if not isinstance(job.task, str) or not 0 < len(job.task) <= MAX_TASK_NAME_LENGTH:
            raise ValueError(f"job {job.id!r} needs a task name of 1-{MAX_TASK_NAME_LENGTH} chars")
        if not isinstance(job.payload, str):
            raise ValueError(f"job {job.id!r} payload must be a str")
        if job.envelope is not None and (not isinstance(job.envelope, str) or not job.envelope):
            raise ValueError(f"job {job.id!r} envelope must be a non-empty str or None")
        epoch_seconds("due_at", job.due_at)


def optional_epoch_seconds(name: str, value: float | None) -> float | None:
    """``None`` (no next run: the schedule ended; no last run yet) or a finite time."""
    return None if value is None else epoch_seconds(name, value)


def _task_name(owner: str, task: object) -> None:
    if not isinstance(task, str) or not 0 < len(task) <= MAX_TASK_NAME_LENGTH:
        raise ValueError(f"{owner} needs a task name of 1-{MAX_TASK_NAME_LENGTH} chars")


def check_new_recurring(recurring: NewRecurring) -> None:
    owner = f"recurring job {validate_job_id(recurring.id)!r}"
    _task_name(owner, recurring.task)
    for name in ("payload", "schedule"):
        if not isinstance(getattr(recurring, name), str):
            raise ValueError(f"{owner}: {name} must be a str")
    if not isinstance(recurring.enabled, bool):
        raise ValueError(f"{owner}: enabled must be a bool")
    optional_epoch_seconds("next_run_at", recurring.next_run_at)


def check_firing(version: int, firing: Firing) -> None:
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"version must be an integer, not {version!r}")
    if not isinstance(firing.history, str):
        raise ValueError("firing history must be a str")
    optional_epoch_seconds("next_run_at", firing.next_run_at)
    optional_epoch_seconds("last_run_at", firing.last_run_at)
    check_new_jobs(firing.jobs)
