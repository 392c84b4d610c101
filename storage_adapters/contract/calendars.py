"""The calendar family (``CalendarStore``): named sets of excluded local dates, kept in storage so
every scheduler process and shard plans recurring jobs with the same calendars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import CalendarRecord

__all__ = ["CalendarStore"]


@runtime_checkable
class CalendarStore(Protocol):
    """Calendars of excluded dates, shared by the recurring jobs that name them.

    A calendar is a name, an IANA time zone and inclusive ranges of ISO dates (``2026-12-24``):
    a recurring job's tick whose local date in that zone falls in a range does not fire. Storage
    only keeps them; the planning is the core's (``parallel_scheduler/calendars.py``). The checks
    of ``checks/calendars.py`` refuse bad input before anything is written.
    """

    def put_calendar(
        self, name: str, timezone: str, dates: Sequence[tuple[str, str]], set_by: str
    ) -> None:
        """Create calendar ``name`` or replace it whole (zone, ranges, ``set_by`` and
        ``set_at``). The ranges are kept sorted and merged where they overlap or touch."""

    def remove_calendar(self, name: str) -> bool:
        """Delete calendar ``name``; whether it existed."""

    def list_calendars(self) -> list[CalendarRecord]:
        """Every calendar, ordered by name."""

    def get_calendar(self, name: str) -> CalendarRecord | None:
        """Calendar ``name``, or ``None``."""
