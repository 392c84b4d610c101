"""The records of a recurring job as saved and as stored, apart so that ``records.py`` (which
re-exports them) stays one module's size."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NewRecurring", "RecurringRecord"]


@dataclass(frozen=True, slots=True)
class _RecurringFields:
    """What a recurring job carries both as saved and as stored, defined once."""

    id: str
    task: str
    payload: str
    schedule: str
    enabled: bool
    next_run_at: float | None


@dataclass(frozen=True, slots=True)
class NewRecurring(_RecurringFields):
    """A recurring job as saved. ``schedule`` and ``history`` are JSON text the scheduler owns
    (cron, time zone, dates, misfire policy; recent firings): storage only keeps them.

    ``next_run_at`` is the next tick (storage clock), ``None`` once the schedule has ended.
    Only ``enabled`` recurring jobs with a ``next_run_at`` are ever due.
    """


@dataclass(frozen=True, slots=True)
class RecurringRecord(_RecurringFields):
    """A stored recurring job. ``version`` grows with every write: the compare-and-set token
    that makes a firing (or an update) act only on the state it was computed from."""

    last_run_at: float | None
    history: str
    version: int
    created_at: float
    updated_at: float
    #: Why it was paused, who paused it and since when (storage clock), kept while it is paused
    #: (``set_recurring_enabled``); ``None`` when it is not, and for a row stored before pauses
    #: carried them.
    pause_note: str | None = None
    paused_by: str | None = None
    paused_at: float | None = None
