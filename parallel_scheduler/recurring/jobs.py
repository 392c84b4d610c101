"""Recurring jobs as callers manage them: create, update, pause, resume, trigger, remove, list.

A firing of recurring job ``R`` at tick ``T`` is an ordinary delayed job with the id
``R@<T in UTC, ISO 8601, seconds>``, e.g. ``nightly-report@2026-11-30T02:00:00Z``, due at ``T``.
Its id is its idempotency key, so a second attempt at the same tick (a retry after a crash, a
racing scheduler) creates nothing: each tick fires exactly once. A manual trigger gets the id
``R@trigger-<UTC time to the microsecond>``. That id form is reserved (``firing_ids``):
``schedule()`` refuses it, so no delayed job can squat a tick.

A manual trigger counts as a run (``recurring_history``): it is recorded in the recent firings
and the last run, never in the next run, so it moves no tick.

Reading a stored recurring job never fails: a row whose schedule no longer validates, whose
payload or history is unreadable, or whose next/last run is outside the valid range is returned
with ``problem`` saying what is wrong, so one bad row cannot break ``list`` for everyone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError, ParallelSchedulerError
from parallel_scheduler.firing_ids import firing_id, trigger_id
from parallel_scheduler.jobs import JobSpec, StoredCall, display_instant, utc_datetime
from parallel_scheduler.ranges import check_page, in_range
from parallel_scheduler.recurring.history import (
    HISTORY_LIMIT,
    RecentFiring,
    add_history,
    later_run,
    read_history,
    recent_firings,
)
from parallel_scheduler.recurring.triggers import MisfirePolicy, Schedule, next_tick
from storage_adapters import (
    InvalidIdentifierError,
    ManualFiring,
    NewJob,
    NewRecurring,
    RecordExistsError,
    RecordNotFoundError,
    RecurringRecord,
    SaveMode,
    Storage,
    validate_job_id,
)
from storage_adapters.shard_guard import verify_shard_count

__all__ = ["HISTORY_LIMIT", "RecurringJob", "RecurringJobs", "add_history", "firing_id"]

T = TypeVar("T")
#: How often a trigger re-reads a recurring job that changed between its read and its write.
TRIGGER_ATTEMPTS = 10
MAX_RECURRING_ID_LENGTH = 200 - len("@trigger-2026-01-01T00:00:00.000000Z")


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


def _shown_instant(name: str, epoch: float | None, problems: list[str]) -> datetime | None:
    """A stored next/last run as a datetime; outside the valid range (or NaN), ``None`` and a
    problem naming the stored value, so that showing the row cannot raise."""
    if epoch is None:
        return None
    if isinstance(epoch, (int, float)) and in_range(epoch):
        return utc_datetime(epoch)
    problems.append(f"{name} {display_instant(epoch)}")
    return None


def _shown_schedule(text: str, problems: list[str]) -> Schedule:
    """The stored schedule, validated; if it is unusable, its fields as stored (those of the
    wrong type left at their defaults), NOT validated: for showing the row, never for firing."""
    try:
        return Schedule.from_json(text)
    except InvalidJobError as exc:
        problems.append(str(exc))
    try:
        stored = json.loads(text)
    except ValueError:
        stored = {}
    shown = object.__new__(Schedule)
    for field in fields(Schedule):
        value = stored.get(field.name, field.default) if isinstance(stored, dict) else None
        if not _plain_type(value, field.default):
            value = field.default
        object.__setattr__(shown, field.name, value)
    return shown


def _plain_type(value: object, default: object) -> bool:
    if isinstance(default, str):
        return isinstance(value, str)
    numeric = not isinstance(value, bool) and isinstance(value, (int, float))
    if isinstance(default, int) and not isinstance(default, bool):
        return numeric and float(value).is_integer()  # type: ignore[arg-type]
    return value is None or (numeric and math.isfinite(value))  # type: ignore[arg-type]


@dataclass(frozen=True)
class RecurringJob(StoredCall):
    schedule: Schedule
    enabled: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    history: list[dict[str, Any]]
    #: None for a healthy row; else what is wrong with the stored row, naming the stored values
    #: (an unusable schedule is then shown as stored, not validated; an out-of-range next/last
    #: run is shown as None)
    problem: str | None = None

    @classmethod
    def from_record(cls, record: RecurringRecord) -> RecurringJob:
        """The stored row as callers see it. Never raises: see ``problem``."""
        problems: list[str] = []
        call = cls.read_call(record, problems)
        schedule = _shown_schedule(record.schedule, problems)
        return cls(
            **call,
            schedule=schedule,
            enabled=record.enabled,
            next_run_at=_shown_instant("next_run_at", record.next_run_at, problems),
            last_run_at=_shown_instant("last_run_at", record.last_run_at, problems),
            history=read_history(record.history, problems),
            problem="; ".join(problems) or None,
        )

    def recent_firings(self) -> list[RecentFiring]:
        """Its kept firings, newest first: scheduled ticks and manual triggers."""
        return recent_firings(self.history)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; never raises (a flagged row carries ``problem``)."""
        return {
            **self._call_dict(),
            "cron": self.schedule.cron or None,
            "every": self.schedule.every,
            "timezone": self.schedule.timezone,
            "misfire_policy": self.schedule.misfire_policy,
            "enabled": self.enabled,
            "next_run_at": self.next_run_at.isoformat() if self.next_run_at else None,
            "last_run_at": self.last_run_at.isoformat() if self.last_run_at else None,
            "recent_firings": [firing.to_dict() for firing in self.recent_firings()],
            "problem": self.problem,
        }


class RecurringJobs:
    """The management API, reached as ``Client(...).recurring``.

    A recurring job fires its task on a cron schedule (in an IANA time zone, with the DST rules
    of ``recurring/triggers.py``) or every so many seconds; the scheduler process fires each tick
    once, as the delayed job ``<id>@<tick in UTC>``. Every method that names a job validates it
    before storage is asked; a storage outage is retried for the client's ``retry_for`` seconds,
    then raised as ``StorageUnavailableError``.

    Example::

        client.recurring.save("nightly-report", "reports.build", "30 2 * * *",
                              timezone="Europe/Berlin", args=["eu"], queue="reports")
        client.recurring.pause("nightly-report")
        client.recurring.resume("nightly-report")
        client.recurring.trigger("nightly-report")  # one extra firing now
        client.recurring.remove("nightly-report")
    """

    def __init__(
        self, storage: Storage, clock: StorageClock, max_payload_bytes: int, retry_for: float
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._retry_for = retry_for
        self._shards_verified = False

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

        :param recurring_id: the recurring job's id (no ``@``: its firings are ``<id>@<tick>``).
        :param task: the task name each firing is sent as.
        :param cron: 5 fields (minute resolution) or 6 with seconds first; give ``cron`` or
            ``every``.
        :param every: an interval in seconds or a ``timedelta`` (1 s to 100 years), ticking on
            a fixed grid from ``start`` (or the Unix epoch).
        :param args: the positional arguments of each firing (JSON values).
        :param kwargs: the keyword arguments of each firing.
        :param timezone: the IANA zone the cron expression is read in (``"UTC"`` by default).
        :param start: no tick before this aware ``datetime``.
        :param end: no tick after this aware ``datetime``.
        :param misfire_policy: what to fire for ticks missed by more than ``misfire_grace``:
            ``"skip"`` none, ``"run_once"`` (default) the latest, ``"run_all"`` each up to
            ``misfire_cap``.
        :param misfire_cap: the most missed ticks ``"run_all"`` fires (at least 1).
        :param misfire_grace: seconds a tick may be late and still count as on time.
        :param enabled: ``False`` saves it paused.
        :param mode: ``"create"`` (default), ``"update"`` or ``"upsert"``.
        :param options: send options of each firing (``queue``, ``priority``, ``headers``, ...).
        :returns: the saved recurring job, with its next run.
        :raises InvalidJobError: an invalid id, cron, interval, time zone, date or policy, a
            schedule that never fires again, ``create`` of an id that exists or ``update`` of
            one that does not; nothing is written.
        :raises StorageUnavailableError: storage could not be reached within ``retry_for``.
        """
        validate_recurring_id(recurring_id)
        seconds = every.total_seconds() if isinstance(every, timedelta) else every
        schedule = Schedule(
            cron,
            timezone=timezone,
            start_at=_epoch(start, "start"),
            end_at=_epoch(end, "end"),
            misfire_policy=misfire_policy,
            misfire_cap=misfire_cap,
            misfire_grace=misfire_grace,
            every=seconds,
        )
        spec = JobSpec(task, args=args, kwargs=kwargs or {}, options=options, id=recurring_id)
        payload = spec.encode(0.0, self._max_payload_bytes).payload
        upcoming = next_tick(schedule, self._clock.now())
        if upcoming is None:
            raise InvalidJobError(
                f"schedule {schedule.describe()} of recurring job {recurring_id!r} never fires "
                f"again: its end date {display_instant(schedule.end_at)} is before its next tick"
            )
        record = NewRecurring(
            id=recurring_id,
            task=task,
            payload=payload,
            schedule=schedule.to_json(),
            enabled=enabled,
            next_run_at=upcoming,
        )
        if not self._shards_verified:  # once: a store of another shard count never fires it
            self._call(lambda: verify_shard_count(self._storage))
            self._shards_verified = True
        try:
            self._call(lambda: self._storage.save_recurring(record, mode))
        except RecordExistsError:
            raise InvalidJobError(f"recurring job {recurring_id!r} exists already") from None
        except RecordNotFoundError:
            raise InvalidJobError(f"recurring job {recurring_id!r} does not exist") from None
        found = self.get(recurring_id)
        assert found is not None
        return found

    def get(self, recurring_id: str) -> RecurringJob | None:
        """The recurring job with this id, or ``None``; a stored one that no longer validates
        comes back with ``problem`` saying why."""
        record = self._call(lambda: self._storage.get_recurring(recurring_id))
        return None if record is None else RecurringJob.from_record(record)

    def list(self, *, limit: int = 100, offset: int = 0) -> list[RecurringJob]:
        """Up to ``limit`` recurring jobs after the first ``offset``, ordered by id.

        :raises InvalidJobError: ``limit`` or ``offset`` out of range (checked before
            storage is asked).
        """
        check_page(limit, offset)  # before any storage call
        records = self._call(lambda: self._storage.list_recurring(limit, offset))
        return [RecurringJob.from_record(r) for r in records]

    def pause(self, recurring_id: str) -> bool:
        """Stop firing until ``resume``; returns whether the job was changed.

        :raises InvalidJobError: no recurring job has this id.
        """
        record = self._existing(recurring_id)
        return call_storage(
            lambda: self._storage.set_recurring_enabled(recurring_id, False, record.next_run_at)
        )

    def resume(self, recurring_id: str) -> bool:
        """Resume from now on: ticks that passed while paused are not fired.

        :returns: whether the job was changed.
        :raises InvalidJobError: no recurring job has this id.
        """
        record = self._existing(recurring_id)
        upcoming = next_tick(Schedule.from_json(record.schedule), self._clock.now())
        return call_storage(
            lambda: self._storage.set_recurring_enabled(recurring_id, True, upcoming)
        )

    def trigger(self, recurring_id: str) -> str:
        """Fire once now, outside the schedule; returns the firing's job id.

        The trigger counts as a run: its job is recorded in the recent firings (marked as a
        trigger) and as the last run, in one write with the job itself. The next run is left as
        it is, so no scheduled tick moves, and none is taken for fired.

        :returns: the firing's job id, ``<id>@trigger-<UTC time to the microsecond>``.
        :raises InvalidJobError: no recurring job has this id.
        :raises ParallelSchedulerError: the job kept changing under every attempt; nothing was
            triggered.
        """
        for _ in range(TRIGGER_ATTEMPTS):
            job_id = self._try_trigger(recurring_id)
            if job_id is not None:
                return job_id
        raise ParallelSchedulerError(
            f"recurring job {recurring_id!r} changed under each of {TRIGGER_ATTEMPTS} attempts "
            "to trigger it; nothing was triggered"
        )

    def _try_trigger(self, recurring_id: str) -> str | None:
        """One trigger from one read of the row; ``None`` if the row changed in between."""
        record = self._existing(recurring_id)
        now = self._clock.now()
        job = NewJob(trigger_id(recurring_id, now), record.task, record.payload, now)
        firing = ManualFiring(
            last_run_at=later_run(record.last_run_at, now),
            history=add_history(record.history, [(now, job.id)], trigger=True),
            job=job,
        )
        written = self._call(
            lambda: self._storage.trigger_recurring(recurring_id, record.version, firing)
        )
        # None: the row changed since it was read, or an earlier try of this very write went
        # through before its reply was lost (then its job exists).
        if written is None and self._call(lambda: self._storage.get_job(job.id)) is None:
            return None
        return job.id

    def remove(self, recurring_id: str) -> bool:
        """Delete the recurring job (its firings already created stay); returns whether it
        existed."""
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
