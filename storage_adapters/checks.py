"""Input checks every adapter runs before it writes, so bad input is refused the same way
everywhere and a bad job cannot leave part of a batch stored."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .base import MAX_TASK_NAME_LENGTH, NewJob, validate_job_id

__all__ = [
    "RECOVERED_REASON",
    "check_new_jobs",
    "epoch_seconds",
    "positive_count",
    "positive_seconds",
]

#: ``last_error`` of a job whose claim ran out before it was marked enqueued.
RECOVERED_REASON = "claim lease expired before the job was marked enqueued"


def epoch_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)


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
        epoch_seconds("due_at", job.due_at)
