"""Recurring jobs on Redis: the part of ``RedisStorage`` that keeps schedules and fires them.

A mixin, kept apart from the one-off jobs' modules; it inherits the plumbing (keys, scripts,
error mapping) of ``redis/plumbing.py``. Every method is one round trip, and every multi-key step
one script.

Keys: ``rec:<id>`` (hash; ``next_run_at`` and ``last_run_at`` are ``''`` for none, ``enabled`` is
``'1'`` or ``'0'``; ``pause_note``, ``paused_by`` and ``paused_at`` only while it is paused),
``rec_ids`` (every id with score 0, so ranks are in id order) and ``rec_due`` (by
``next_run_at``: exactly the enabled ones that have a next run, so due ones are a range).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from storage_adapters.checks.lookups import checked_id_batch, names_no_job
from storage_adapters.checks.pauses import check_pause_note
from storage_adapters.checks.values import (
    check_manual_firing,
    check_new_recurrings,
    check_planned_firings,
    check_save_mode,
    epoch_seconds,
    flag,
    non_negative_offset,
    positive_count,
)
from storage_adapters.errors import refused_save
from storage_adapters.records import (
    ClaimedJob,
    JobState,
    LockLease,
    ManualFiring,
    NewRecurring,
    PlannedFiring,
    RecurringRecord,
    SaveMode,
)
from storage_adapters.redis.plumbing import RedisPlumbing, job_fields

__all__ = ["RECURRING_SCRIPTS", "RedisRecurringStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
RECURRING_SCRIPTS = (
    "save_recurring",
    "set_recurring_enabled",
    "remove_recurring",
    "fire_recurring",
    "trigger_recurring",
    "due_recurring",
    "list_recurring",
)
# The order of recurring_rows in lua/_common.lua.
_RECURRING_FIELDS = [
    "task",
    "payload",
    "schedule",
    "enabled",
    "next_run_at",
    "last_run_at",
    "history",
    "version",
    "created_at",
    "updated_at",
    "pause_note",
    "paused_by",
    "paused_at",
]
# save_recurring's error replies (then the ids): the mode forbade the write, nothing was written.
_SAVE_REFUSALS = ("RECURRING_EXISTS", "RECURRING_MISSING")


def _time_arg(name: str, value: float | None) -> str:
    """``''`` stands for "no time"; ``repr`` round-trips, so the hash keeps the caller's double."""
    return "" if value is None else repr(epoch_seconds(name, value))


def _optional_time(value: str) -> float | None:
    return float(value) if value else None


def _flag(name: str, value: bool) -> str:
    return "1" if flag(name, value) else "0"


def _record(recurring_id: str, fields: Sequence[Any]) -> RecurringRecord:
    """A hash's ``_RECURRING_FIELDS``; the pause's fields are missing (``None``) while it is
    enabled and in a hash written before pauses carried them."""
    (task, payload, schedule, enabled, next_run_at, last_run_at, history, version, created_at,
     updated_at, pause_note, paused_by, paused_at) = fields  # fmt: skip
    return RecurringRecord(
        id=recurring_id,
        task=task,
        payload=payload,
        schedule=schedule,
        enabled=enabled == "1",
        next_run_at=_optional_time(next_run_at),
        last_run_at=_optional_time(last_run_at),
        history=history,
        version=int(version),
        created_at=float(created_at),
        updated_at=float(updated_at),
        pause_note=pause_note,
        paused_by=paused_by,
        paused_at=None if paused_at is None else float(paused_at),
    )


class RedisRecurringStore(RedisPlumbing):
    """The recurring-jobs methods of the ``Storage`` contract, for ``RedisStorage`` to inherit."""

    def _recurring_key(self, recurring_id: str) -> str:
        return self._key(f"rec:{recurring_id}")

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        (created,) = self.save_recurring_many([recurring], mode)
        return created

    def save_recurring_many(self, recurrings: Sequence[NewRecurring], mode: SaveMode) -> list[bool]:
        check_save_mode(mode)
        check_new_recurrings(recurrings)
        if not recurrings:
            return []
        args = [mode, self._key("rec:")]
        for recurring in recurrings:
            args += (
                recurring.id,
                recurring.task,
                recurring.payload,
                recurring.schedule,
                _flag("enabled", recurring.enabled),
                _time_arg("next_run_at", recurring.next_run_at),
            )
        keys = [self._key("rec_ids"), self._key("rec_due")]
        with self._talking() as client:
            try:
                created = self._call(client, "save_recurring", keys, args)
            except redis.ResponseError as exc:
                reason, _, ids = str(exc).partition(" ")
                if reason not in _SAVE_REFUSALS:
                    raise
                raise refused_save(mode, ids.split()) from None
        return [bool(flag) for flag in created]

    def existing_recurring_ids(self, recurring_ids: Sequence[str]) -> set[str]:
        ids = checked_id_batch(recurring_ids)
        if not ids:
            return set()
        with self._talking() as client:  # one ZMSCORE on the index of recurring ids
            scores = client.zmscore(self._key("rec_ids"), ids)
        return {rid for rid, score in zip(ids, scores, strict=True) if score is not None}

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        if names_no_job(recurring_id):
            return None
        with self._talking() as client:
            fields = client.hmget(self._recurring_key(recurring_id), _RECURRING_FIELDS)
        return _record(recurring_id, fields) if fields[0] is not None else None

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        last = non_negative_offset(offset) + positive_count("limit", limit) - 1
        args: list[str | int] = [self._key("rec:"), offset, last]
        rows = self._run("list_recurring", [self._key("rec_ids")], args)
        return [_record(row[0], row[1:]) for row in rows]

    def remove_recurring(self, recurring_id: str) -> bool:
        if names_no_job(recurring_id):
            return False
        keys = [self._recurring_key(recurring_id), self._key("rec_ids"), self._key("rec_due")]
        return bool(self._run("remove_recurring", keys, [recurring_id]))

    def set_recurring_enabled(
        self,
        recurring_id: str,
        enabled: bool,
        next_run_at: float | None,
        note: str = "",
        paused_by: str = "",
        version: int | None = None,
    ) -> bool:
        keys = [self._recurring_key(recurring_id), self._key("rec_due")]
        args = [recurring_id, _flag("enabled", enabled), _time_arg("next_run_at", next_run_at)]
        args += check_pause_note(note, paused_by)
        args.append("" if version is None else str(int(version)))
        if names_no_job(recurring_id):
            return False
        return bool(self._run("set_recurring_enabled", keys, args))

    def fetch_due_recurring(
        self, limit: int, until: float | None = None, offset: int = 0
    ) -> list[RecurringRecord]:
        args: list[str | int] = [self._key("rec:"), positive_count("limit", limit)]
        args.append(non_negative_offset(offset))
        if until is not None:
            args.append(repr(epoch_seconds("until", until)))
        rows = self._run("due_recurring", [self._key("rec_due")], args)
        return [_record(row[0], row[1:]) for row in rows]

    def next_recurring_at(self) -> float | None:
        with self._talking() as client:  # the due index holds exactly the enabled ones
            first = client.zrange(self._key("rec_due"), 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def fire_recurring_many(
        self, lock: LockLease, planned: Sequence[PlannedFiring]
    ) -> list[list[bool] | None]:
        return self._fire(lock, planned, None)[0]

    def fire_recurring_to_lists(
        self, lock: LockLease, planned: Sequence[PlannedFiring], list_db: int
    ) -> tuple[list[list[bool] | None], list[ClaimedJob]]:
        """``fire_recurring_many``, and every new firing job that is due and carries an
        envelope goes straight onto its list in database ``list_db`` of this server, Enqueued
        (``ListFiringStorage``). Returns the flags and the jobs pushed, in chunk order."""
        return self._fire(lock, planned, self._broker_db(list_db, "fire_recurring_to_lists"))

    def _fire(
        self, lock: LockLease, planned: Sequence[PlannedFiring], list_db: int | None
    ) -> tuple[list[list[bool] | None], list[ClaimedJob]]:
        check_planned_firings(planned)
        if not planned:
            return [], []
        args = [lock.owner, str(lock.token), self._key("rec:"), self._key("job:")]
        args += ("" if list_db is None else str(list_db), str(self._db))
        for item in planned:
            firing = item.firing
            args += (
                item.recurring_id,
                str(item.version),
                _time_arg("next_run_at", firing.next_run_at),
                _time_arg("last_run_at", firing.last_run_at),
                firing.history,
                str(len(firing.jobs)),
            )
            args += job_fields(firing.jobs)
        keys = [
            self._key(f"lock:{lock.name}"),
            self._key("rec_due"),
            *self._job_keys(),
            self._state_key(JobState.ENQUEUED),
            self._finished_key(JobState.ENQUEUED),
        ]
        replies = self._run("fire_recurring", keys, args)
        results: list[list[bool] | None] = []
        pushed: list[ClaimedJob] = []
        for item, reply in zip(planned, replies, strict=True):
            if reply is None:
                results.append(None)
                continue
            results.append([flag != "0" for flag in reply])
            pushed += (
                ClaimedJob(job.id, job.task, "", job.due_at, 1, lock.token, queue=job.queue or None)
                for job, flag in zip(item.firing.jobs, reply, strict=True)
                if flag == "2"
            )
        return results, pushed

    def trigger_recurring(
        self, recurring_id: str, version: int, firing: ManualFiring
    ) -> bool | None:
        check_manual_firing(version, firing)
        keys = [self._recurring_key(recurring_id), *self._job_keys()]
        args = [
            str(version),
            _time_arg("last_run_at", firing.last_run_at),
            firing.history,
            *self._job_args((firing.job,)),
        ]
        stored = self._run("trigger_recurring", keys, args)
        return None if stored is None else bool(stored)

    def count_recurring(self) -> int:
        with self._talking() as client:
            return int(client.zcard(self._key("rec_ids")))
