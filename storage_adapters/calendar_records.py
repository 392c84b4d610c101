"""The record of a calendar of excluded dates (``CalendarStore``), apart so that ``records.py``
(which re-exports it) stays one module's size."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CalendarRecord"]


@dataclass(frozen=True, slots=True)
class CalendarRecord:
    """One named calendar of excluded dates (``CalendarStore``): the local dates of time zone
    ``timezone`` that recurring jobs naming it do not fire on, as inclusive ``(first, last)``
    ISO date ranges in order; who set it and when (storage clock)."""

    name: str
    timezone: str
    ranges: tuple[tuple[str, str], ...]
    set_by: str
    set_at: float
