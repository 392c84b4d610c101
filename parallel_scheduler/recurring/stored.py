"""A stored recurring job as callers see it (``RecurringJob``): reading a row never fails. A row
whose schedule no longer validates, whose payload or history is unreadable, or whose next/last
run is outside the valid range is returned with ``problem`` saying what is wrong, so one bad row
cannot break ``list`` for everyone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jobs import StoredCall, display_instant, utc_datetime
from parallel_scheduler.ranges import in_range
from parallel_scheduler.recurring.history import (
    RecentFiring,
    read_history,
    recent_firings,
    scheduled_runs,
)
from parallel_scheduler.recurring.limits import limit_reached
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import RecurringRecord

__all__ = ["RecurringJob"]


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
    #: While paused: why, who paused it and since when (``None`` when enabled, or paused by a
    #: version before pauses carried them)
    pause_note: str | None = None
    paused_by: str | None = None
    paused_at: datetime | None = None

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
            pause_note=record.pause_note,
            paused_by=record.paused_by,
            paused_at=_shown_instant("paused_at", record.paused_at, problems),
            problem="; ".join(problems) or None,
        )

    @property
    def runs(self) -> int:
        """The scheduled ticks it has fired (``history.scheduled_runs``): what ``max_runs``
        limits; triggers and backfills are not counted."""
        return scheduled_runs(self.history)

    @property
    def ended_by_limit(self) -> bool:
        """Whether its ``max_runs`` scheduled firings are done (it fires no more ticks)."""
        return limit_reached(self.schedule.max_runs, self.runs)

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
            "jitter": self.schedule.jitter,
            "catch_up_window": self.schedule.catch_up_window,
            "exclude": list(self.schedule.exclude or ()),
            "max_runs": self.schedule.max_runs,
            "runs": self.runs,
            "overlap": self.schedule.overlap,
            "overlap_timeout": self.schedule.overlap_timeout,
            "pause_after_failures": self.schedule.pause_after_failures,
            "enabled": self.enabled,
            "next_run_at": self.next_run_at.isoformat() if self.next_run_at else None,
            "last_run_at": self.last_run_at.isoformat() if self.last_run_at else None,
            "pause_note": self.pause_note,
            "paused_by": self.paused_by,
            "paused_at": self.paused_at.isoformat() if self.paused_at else None,
            "recent_firings": [firing.to_dict() for firing in self.recent_firings()],
            "problem": self.problem,
        }
