"""The saving door's side of calendars of excluded dates: a recurring job may only name
calendars that exist, and its first next run is already past its excluded dates.

The scheduler's side (a tick on an excluded date neither fires nor counts as missed) is in
``misfires.py``; the calendars themselves in ``calendars.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from parallel_scheduler.calendars import Exclusion, before, calendars_of
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.misfires import next_included
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import CalendarRecord, NewRecurring, Storage

__all__ = ["jobs_naming", "with_calendars"]

#: Recurring jobs read per storage call while counting those that name a calendar.
PAGE = 1000


def with_calendars(
    records: Sequence[NewRecurring], read: Callable[[], list[CalendarRecord]]
) -> list[NewRecurring]:
    """``records`` checked against the store's calendars (``read``, called once and only when
    a schedule excludes some): a name of no calendar is refused with ``InvalidJobError`` before
    anything is written; each next run moved past the dates its calendars exclude."""
    schedules = [Schedule.from_json(record.schedule) for record in records]
    if not any(schedule.exclude for schedule in schedules):
        return list(records)
    calendars = calendars_of(read())
    missing = sorted({name for s in schedules for name in s.exclude if name not in calendars})
    if missing:
        raise InvalidJobError(
            f"no calendar named {', '.join(map(repr, missing))}: add it first "
            "(Client.put_calendar, parallel-scheduler calendar add); nothing was written"
        )
    moved: list[NewRecurring] = []
    for record, schedule in zip(records, schedules, strict=True):
        exclusion = Exclusion.of(schedule.exclude, calendars)
        if record.next_run_at is not None and exclusion is not None:
            upcoming = next_included(schedule, before(record.next_run_at), exclusion)
            record = replace(record, next_run_at=upcoming)
        moved.append(record)
    return moved


def jobs_naming(storage: Storage, name: str) -> int:
    """How many recurring jobs name calendar ``name`` in their ``exclude``: every job is read,
    ``PAGE`` per call, so the count is exact however many there are."""
    count, offset = 0, 0
    while True:
        page = storage.list_recurring(PAGE, offset)
        for record in page:
            try:
                count += name in Schedule.from_json(record.schedule).exclude
            except ValueError:  # an unusable row: the recurring listing reports it
                continue
        if len(page) < PAGE:
            return count
        offset += PAGE
