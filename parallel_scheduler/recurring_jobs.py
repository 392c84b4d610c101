"""Recurring jobs as callers manage them: create, update, pause, resume, trigger, remove, list.

A firing of recurring job ``R`` at tick ``T`` is an ordinary delayed job with the id
``R@<T in UTC, ISO 8601, seconds>``, e.g. ``nightly-report@2026-11-30T02:00:00Z``, due at ``T``.
Its id is its idempotency key, so a second attempt at the same tick (a retry after a crash, a
racing scheduler) creates nothing: each tick fires exactly once. A manual trigger gets the id
``R@trigger-<UTC time to the microsecond>``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from storage_adapters import (
    InvalidIdentifierError,
    NewJob,
    NewRecurring,
    RecurringRecord,
    SaveMode,
    Storage,
    validate_job_id,
)

from .clock import StorageClock
from .errors import InvalidJobError
from .jobs import JobSpec, decode_payload, utc_datetime
from .retrying import call_storage
from .triggers import MisfirePolicy, Schedule, next_tick

__all__ = ["HISTORY_LIMIT", "RecurringJob", "RecurringJobs", "firing_id"]

T = TypeVar("T")
HISTORY_LIMIT = 20  # recent firings kept per recurring job
MAX_RECURRING_ID_LENGTH = 200 - len("@trigger-2026-01-01T00:00:00.000000Z")


def _iso(epoch: float, timespec: str = "seconds") -> str:
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z")


def firing_id(recurring_id: str, tick: float) -> str:
    return f"{recurring_id}@{_iso(tick)}"


def validate_recurring_id(recurring_id: str) -> str:
    try:
        validate_job_id(recurring_id)
    except InvalidIdentifierError as exc:
        raise InvalidJobError(f"recurring job id: {exc}") from None
    if "@" in recurring_id:
        raise InvalidJobError(f"recurring job id {recurring_id!r} must not contain '@'")
    if len(recurring_id) > MAX_RECURRING_ID_LENGTH:
        raise InvalidJobError(
            f"recurring job id is {len(recurring_id)} characters; the limit is "
            f"{MAX_RECURRING_ID_LENGTH}"
        )
    return recurring_id


def _aware(epoch: float | None) -> datetime | None:
    return None if epoch is None else utc_datetime(epoch)


def add_history(history: str, entries: Sequence[tuple[float, str]]) -> str:
    """The history JSON with ``entries`` (tick, job id) appended, the oldest dropped."""
    kept = json.loads(history or "[]") + [{"tick": t, "job_id": j} for t, j in entries]
    return json.dumps(kept[-HISTORY_LIMIT:], separators=(",", ":"))


@dataclass(frozen=True)
class RecurringJob:
    id: str
    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    schedule: Schedule
    enabled: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    history: list[dict[str, Any]]

    @classmethod
    def from_record(cls, record: RecurringRecord) -> RecurringJob:
        args, kwargs, options = decode_payload(record.payload)
        return cls(
            id=record.id,
            task=record.task,
            args=args,
            kwargs=kwargs,
            options=options,
            schedule=Schedule.from_json(record.schedule),
            enabled=record.enabled,
            next_run_at=_aware(record.next_run_at),
            last_run_at=_aware(record.last_run_at),
            history=json.loads(record.history or "[]"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "options": self.options,
            "cron": self.schedule.cron or None,
            "every": self.schedule.every,
            "timezone": self.schedule.timezone,
            "misfire_policy": self.schedule.misfire_policy,
            "enabled": self.enabled,
            "next_run_at": self.next_run_at.isoformat() if self.next_run_at else None,
            "last_run_at": self.last_run_at.isoformat() if self.last_run_at else None,
        }


class RecurringJobs:
    """The management API, reached as ``Client(...).recurring``."""

    def __init__(
        self, storage: Storage, clock: StorageClock, max_payload_bytes: int, retry_for: float
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._retry_for = retry_for

    def _call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self._retry_for)

    def save(
        self,
        recurring_id: str,
        task: str,
        cron: str = "",
        *,
        every: float | timedelta | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        timezone: str = "UTC",
        start: datetime | None = None,
        end: datetime | None = None,
        misfire_policy: MisfirePolicy = "run_once",
        misfire_cap: int = 100,
        misfire_grace: float = 60.0,
        enabled: bool = True,
        mode: SaveMode = "create",
        **options: Any,
    ) -> RecurringJob:
        """Create (``mode="create"``), replace (``"update"``) or either (``"upsert"``).

        The schedule is a ``cron`` expression or an interval (``every``, seconds or timedelta).
        Everything is validated before anything is written; the next run is recomputed from
        the new cron and time zone. Updating an id that does not exist is an error.
        """
        validate_recurring_id(recurring_id)
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        schedule = Schedule(
            cron, timezone, _epoch(start, "start"), _epoch(end, "end"),
            misfire_policy, misfire_cap, misfire_grace, seconds,
        )  # fmt: skip
        spec = JobSpec(task, args, kwargs or {}, options, recurring_id)
        payload = spec.encode(0.0, self._max_payload_bytes).payload
        record = NewRecurring(
            recurring_id, task, payload, schedule.to_json(), enabled,
            next_tick(schedule, self._clock.now()),
        )  # fmt: skip
        try:
            self._call(lambda: self._storage.save_recurring(record, mode))
        except KeyError:
            verb = "exists already" if mode == "create" else "does not exist"
            raise InvalidJobError(f"recurring job {recurring_id!r} {verb}") from None
        found = self.get(recurring_id)
        assert found is not None
        return found

    def get(self, recurring_id: str) -> RecurringJob | None:
        record = self._call(lambda: self._storage.get_recurring(recurring_id))
        return None if record is None else RecurringJob.from_record(record)

    def list(self, *, limit: int = 100, offset: int = 0) -> list[RecurringJob]:
        records = self._call(lambda: self._storage.list_recurring(limit, offset))
        return [RecurringJob.from_record(r) for r in records]

    def pause(self, recurring_id: str) -> bool:
        record = self._existing(recurring_id)
        return call_storage(
            lambda: self._storage.set_recurring_enabled(recurring_id, False, record.next_run_at)
        )

    def resume(self, recurring_id: str) -> bool:
        """Resume from now on: ticks that passed while paused are not fired."""
        record = self._existing(recurring_id)
        upcoming = next_tick(Schedule.from_json(record.schedule), self._clock.now())
        return call_storage(
            lambda: self._storage.set_recurring_enabled(recurring_id, True, upcoming)
        )

    def trigger(self, recurring_id: str) -> str:
        """Fire once now, outside the schedule; returns the firing's job id."""
        record = self._existing(recurring_id)
        now = self._clock.now()
        job = NewJob(
            f"{recurring_id}@trigger-{_iso(now, 'microseconds')}", record.task, record.payload, now
        )
        self._call(lambda: self._storage.add_jobs([job]))
        return job.id

    def remove(self, recurring_id: str) -> bool:
        return self._call(lambda: self._storage.remove_recurring(recurring_id))

    def _existing(self, recurring_id: str) -> RecurringRecord:
        record = self._call(lambda: self._storage.get_recurring(recurring_id))
        if record is None:
            raise InvalidJobError(f"recurring job {recurring_id!r} does not exist")
        return record


def _epoch(moment: datetime | None, name: str) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise InvalidJobError(f"{name} date {moment.isoformat()} has no time zone")
    return moment.timestamp()
