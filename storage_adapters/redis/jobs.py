"""The jobs part of the ``Storage`` contract (``JobStore``: accept, get, list, cancel, reschedule,
count) for ``RedisStorage`` to inherit, and how numbers travel to the scripts.

Accepting jobs shares its job encoding (``RedisPlumbing._job_args``) with firing recurring jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from storage_adapters.checks.lookups import names_no_job
from storage_adapters.checks.values import (
    epoch_seconds,
    positive_seconds,
    stored_seconds,
)
from storage_adapters.errors import RecordExistsError
from storage_adapters.records import JobRecord, JobState, NewJob
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["RedisJobStore", "float_arg", "lease_arg"]

_JOB_FIELDS = [
    "task",
    "payload",
    "due_at",
    "state",
    "attempts",
    "created_at",
    "updated_at",
    "last_error",
    "queue",
    "unique_key",
]


def float_arg(name: str, value: float, *, positive: bool = False) -> str:
    """``repr`` round-trips exactly, so the scripts parse the very double the caller passed."""
    return repr(positive_seconds(name, value) if positive else epoch_seconds(name, value))


def lease_arg(value: float) -> str:
    return float_arg("lease", value, positive=True)


def _record(job_id: str, fields: Sequence[Any]) -> JobRecord:
    task, payload, due_at, state, attempts, created_at, updated_at, last_error = fields[:8]
    return JobRecord(
        id=job_id,
        task=task,
        payload=payload,
        due_at=stored_seconds(due_at),
        state=JobState(state),
        attempts=int(attempts),
        created_at=stored_seconds(created_at),
        updated_at=stored_seconds(updated_at),
        last_error=last_error,
        queue=fields[8],
        unique_key=fields[9],
    )


class RedisJobStore(RedisPlumbing):
    """Accept, read, list, cancel, reschedule and count jobs, for ``RedisStorage`` to inherit."""

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        args = self._job_args(jobs)
        if not jobs:
            return []
        return [bool(flag) for flag in self._run("add_jobs", self._job_keys(), args)]

    def get_job(self, job_id: str) -> JobRecord | None:
        if names_no_job(job_id):
            return None
        with self._talking() as client:
            fields = client.hmget(self._key(f"job:{job_id}"), _JOB_FIELDS)
        return _record(job_id, fields) if fields[0] is not None else None

    def cancel(self, job_id: str) -> bool:
        if names_no_job(job_id):
            return False
        keys = [
            self._key("schedule"),
            self._state_key(JobState.CANCELLED),
            self._finished_key(JobState.CANCELLED),
            self._state_key(JobState.HELD),
        ]
        return bool(self._run("cancel", keys, [self._key("job:"), job_id]))

    def reschedule(self, job_id: str, due_at: float) -> bool:
        keys = [
            self._key("schedule"),
            self._key("all"),
            self._state_key(JobState.FAILED),
            *self._pause_keys(),
            self._key("unique"),
        ]
        args = [self._key("job:"), job_id, float_arg("due_at", due_at)]
        if names_no_job(job_id):
            return False
        with self._talking() as client:
            try:
                return bool(self._call(client, "reschedule", keys, args))
            except redis.ResponseError as exc:
                reason, _, key = str(exc).partition(" ")
                if reason != "UNIQUE_HELD":
                    raise
        raise RecordExistsError(
            f"job {job_id!r} cannot be rescheduled: unique_key {key!r} of its task is held by "
            "another job meanwhile"
        )

    def count_by_state(self) -> dict[JobState, int]:
        with self._talking() as client:
            pipe = client.pipeline(transaction=True)
            for state in JobState:
                pipe.zcard(self._state_key(state))
            counts = pipe.execute()
        return {state: int(n) for state, n in zip(JobState, counts, strict=True)}
