"""The calendar family (``CalendarStore``) on every adapter kind: calendars of excluded dates are
stored whole, replaced whole, listed by name and removed; bad input is refused before anything
is written, with the same words everywhere (``checks/calendars.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from storage_adapters import CalendarStore, InvalidArgumentError, Storage


def test_every_adapter_is_a_calendar_store(storage: Storage) -> None:
    assert isinstance(storage, CalendarStore)


def test_a_calendar_is_stored_merged_listed_and_replaced(storage: Storage) -> None:
    # Given a calendar with overlapping, touching and unordered ranges
    before = storage.now()
    storage.put_calendar(
        "holidays-de",
        "Europe/Berlin",
        [("2026-12-25", "2026-12-26"), ("2026-12-24", "2026-12-25"), ("2026-12-27", "2026-12-27"),
         ("2026-01-01", "2026-01-01")],
        "ops@host",
    )  # fmt: skip
    storage.put_calendar("empty", "UTC", [], "")
    # Then it is kept sorted and merged, with who set it and when
    record = storage.get_calendar("holidays-de")
    assert record is not None
    assert record.timezone == "Europe/Berlin"
    assert record.ranges == (("2026-01-01", "2026-01-01"), ("2026-12-24", "2026-12-27"))
    assert record.set_by == "ops@host"
    assert before - 1 <= record.set_at <= storage.now() + 1
    assert [c.name for c in storage.list_calendars()] == ["empty", "holidays-de"]
    # When it is put again, it is replaced whole
    storage.put_calendar("holidays-de", "UTC", [("2027-01-01", "2027-01-01")], "other")
    again = storage.get_calendar("holidays-de")
    assert again is not None
    assert (again.timezone, again.ranges, again.set_by) == (
        "UTC", (("2027-01-01", "2027-01-01"),), "other"
    )  # fmt: skip
    # And removing it says whether it existed
    assert storage.remove_calendar("holidays-de") is True
    assert storage.remove_calendar("holidays-de") is False
    assert storage.get_calendar("holidays-de") is None
    assert [c.name for c in storage.list_calendars()] == ["empty"]


def test_a_large_calendar_round_trips(storage: Storage) -> None:
    days = [
        (f"2026-{m:02d}-{d:02d}", f"2026-{m:02d}-{d:02d}") for m in range(1, 13) for d in (3, 9, 17)
    ]
    storage.put_calendar("many", "America/New_York", days, "")
    record = storage.get_calendar("many")
    assert record is not None and len(record.ranges) == len(days)


BAD: list[tuple[str, Any, Any, Any, str]] = [
    ("", "UTC", [], "", "calendar name"),
    ("has space", "UTC", [], "", "calendar name"),
    ("a,b", "UTC", [], "", "calendar name"),
    ("x" * 101, "UTC", [], "", "calendar name"),
    ("ok", "Mars/Olympus", [], "", "time zone"),
    ("ok", "localtime", [], "", "time zone"),
    ("ok", "UTC", [("2026-02-30", "2026-02-30")], "", "ISO date"),
    ("ok", "UTC", [("26-12-25", "26-12-25")], "", "ISO date"),
    ("ok", "UTC", [("2026-12-26", "2026-12-25")], "", "ends before it starts"),
    ("ok", "UTC", ["2026-12-25"], "", "pair of ISO dates"),
    ("ok", "UTC", "2026-12-25", "", "list of"),
    ("ok", "UTC", [("2026-01-01", "2026-01-01")] * 10_001, "", "at most 10000"),
    ("ok", "UTC", [], "x" * 256, "set_by"),
]


@pytest.mark.untouched
@pytest.mark.parametrize(("name", "zone", "dates", "by", "words"), BAD)
def test_bad_calendars_are_refused_and_nothing_is_written(
    storage: Storage, name: Any, zone: Any, dates: Any, by: Any, words: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        storage.put_calendar(name, zone, dates, by)
    assert storage.list_calendars() == []


@pytest.mark.untouched
def test_bad_names_are_refused_by_every_call(storage: Storage) -> None:
    for call in (storage.remove_calendar, storage.get_calendar):
        with pytest.raises(InvalidArgumentError, match="calendar name"):
            call("two words")
    assert storage.list_calendars() == []
