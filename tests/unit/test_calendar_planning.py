"""The planner with calendars of excluded dates, as pure functions (``misfires.plan_firing``,
``calendars.py``): a long excluded range is one jump, not a walk; the excluded ticks are neither
fired nor missed; the local date is the calendar's zone's; iCalendar events become ranges with
an exclusive ``DTEND``."""

from __future__ import annotations

import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from parallel_scheduler.calendars import Calendar, calendar_names, calendars_of, parse_ics
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.misfires import plan_firing
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import CalendarRecord

BERLIN = ZoneInfo("Europe/Berlin")


def _calendars(*records: tuple[str, str, tuple[tuple[str, str], ...]]) -> dict[str, Calendar]:
    return calendars_of(
        CalendarRecord(name, zone, ranges, "", 0.0) for name, zone, ranges in records
    )


def _at(text: str, zone: ZoneInfo = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_a_year_long_range_under_a_one_second_interval_is_one_jump() -> None:
    calendars = _calendars(("year", "Europe/Berlin", (("2026-01-01", "2026-12-31"),)))
    schedule = Schedule(every=1.0, misfire_policy="run_all", misfire_cap=5, exclude=("year",))
    started = time.perf_counter()
    plan = plan_firing(schedule, _at("2025-12-31T23:59:58"), _at("2027-01-01T00:00:02"), calendars)
    assert time.perf_counter() - started < 1.0
    # the two ticks before the range (missed) and the three after it (on time); none excluded
    assert plan.missed == 2
    assert plan.ticks == [
        _at("2025-12-31T23:59:58"),
        _at("2025-12-31T23:59:59"),
        _at("2027-01-01T00:00:00"),
        _at("2027-01-01T00:00:01"),
        _at("2027-01-01T00:00:02"),
    ]
    assert plan.next_run_at == _at("2027-01-01T00:00:03")


def test_the_local_date_is_the_calendars_own_zone() -> None:
    # 02:30 in Berlin on 27 November 2026 is 20:30 on the 26th in New York
    calendars = _calendars(("us", "America/New_York", (("2026-11-26", "2026-11-26"),)))
    schedule = Schedule("30 2 * * *", timezone="Europe/Berlin", exclude=("us",))
    due = _at("2026-11-27T02:30:00")
    plan = plan_firing(schedule, due, due + 1, calendars)
    assert (plan.ticks, plan.missed) == ([], 0)
    assert plan.next_run_at == _at("2026-11-28T02:30:00")
    # a calendar that does not exist excludes nothing
    assert plan_firing(schedule, due, due + 1, {}).ticks == [due]


def test_run_once_fires_the_latest_tick_not_excluded() -> None:
    calendars = _calendars(("de", "Europe/Berlin", (("2026-03-30", "2026-03-31"),)))
    schedule = Schedule("30 2 * * *", timezone="Europe/Berlin", exclude=("de",))
    plan = plan_firing(schedule, _at("2026-03-28T02:30:00"), _at("2026-03-31T12:00:00"), calendars)
    # 29 March's 02:30 is in the spring-forward gap: it fires at 03:00 CEST
    assert plan.ticks == [_at("2026-03-29T03:00:00")]
    assert plan.missed == 2
    assert plan.next_run_at == _at("2026-04-01T02:30:00")


def test_schedules_keep_their_exclude_and_refuse_bad_names() -> None:
    schedule = Schedule("0 9 * * *", exclude=("a", "b", "a"))
    assert schedule.exclude == ("a", "b")
    assert Schedule.from_json(schedule.to_json()) == schedule
    assert "exclude" not in Schedule("0 9 * * *").to_json()
    with pytest.raises(InvalidJobError, match="calendar name"):
        Schedule("0 9 * * *", exclude=("two words",))
    with pytest.raises(InvalidJobError, match="list of calendar names"):
        Schedule("0 9 * * *", exclude="abc")  # type: ignore[arg-type]
    assert calendar_names(["a,b", " c ", ""]) == ("a", "b", "c")


def test_ics_events_become_ranges_with_an_exclusive_end() -> None:
    text = (
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20261224\nDTEND;VALUE=DATE:20261227\n"
        "END:VEVENT\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20260501\nEND:VEVENT\nBEGIN:VEVENT\n"
        "DTSTART:20260614T230000Z\nDTEND:20260615T010000Z\nEND:VEVENT\nEND:VCALENDAR\n"
    )
    assert parse_ics(text, "Europe/Berlin") == [
        ("2026-12-24", "2026-12-26"),
        ("2026-05-01", "2026-05-01"),
        ("2026-06-15", "2026-06-15"),  # 01:00-03:00 in Berlin
    ]
    with pytest.raises(ValueError, match="cannot read"):
        parse_ics("BEGIN:VEVENT\nDTSTART:tomorrow\nEND:VEVENT\n", "UTC")
