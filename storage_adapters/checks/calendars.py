"""What every adapter checks before storing a calendar of excluded dates (``CalendarStore`` in
``contract/calendars.py``): one home for the bounds and the refusals, so the SQL, Redis and
sharded stores refuse the same input with the same words before anything is written."""

from __future__ import annotations

import zoneinfo
from collections.abc import Sequence
from datetime import date
from functools import lru_cache

from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH
from storage_adapters.errors import InvalidArgumentError

__all__ = [
    "MAX_CALENDAR_NAME_LENGTH",
    "MAX_CALENDAR_RANGES",
    "check_calendar",
    "check_calendar_name",
    "merged_ranges",
]

#: The longest calendar name (a short key such as ``holidays-de``, shown in every surface).
MAX_CALENDAR_NAME_LENGTH = 100
#: The most ranges one calendar keeps: decades of holidays, and a bound on what a pass reads.
MAX_CALENDAR_RANGES = 10_000
#: Zone keys that name no IANA zone the same on every host (as ``recurring/triggers.py``).
_MACHINE_KEYS = frozenset({"localtime", "Factory", "posixrules"})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(
        key
        for key in zoneinfo.available_timezones()
        if key not in _MACHINE_KEYS and not key.startswith(("posix/", "right/"))
    )


def check_calendar_name(name: object) -> str:
    """A calendar name: 1-100 printable characters without spaces or commas (a job's
    ``exclude`` list and the command line separate names with commas)."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_CALENDAR_NAME_LENGTH:
        raise InvalidArgumentError(
            f"calendar name must be a string of 1-{MAX_CALENDAR_NAME_LENGTH} characters, "
            f"not {name!r}"
        )
    if not name.isprintable() or any(c.isspace() or c == "," for c in name):
        raise InvalidArgumentError(
            f"calendar name {name!r} must be printable, without spaces or commas"
        )
    return name


def _date(value: object) -> date:
    if not isinstance(value, str) or len(value) != 10:
        raise InvalidArgumentError(
            f"a calendar date must be an ISO date (YYYY-MM-DD), not {value!r}"
        )
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidArgumentError(
            f"a calendar date must be an ISO date (YYYY-MM-DD), not {value!r}"
        ) from None


def merged_ranges(ranges: Sequence[tuple[date, date]]) -> tuple[tuple[str, str], ...]:
    """``ranges`` sorted, those that overlap or touch merged, as ISO strings."""
    merged: list[list[date]] = []
    for first, last in sorted(ranges):
        if merged and first.toordinal() <= merged[-1][1].toordinal() + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return tuple((first.isoformat(), last.isoformat()) for first, last in merged)


def check_calendar(
    name: object, timezone: object, dates: object, set_by: object
) -> tuple[str, str, tuple[tuple[str, str], ...], str]:
    """All of a calendar, checked: its name, an IANA zone key, at most ``MAX_CALENDAR_RANGES``
    ranges of ISO dates each ``(first, last)`` with ``first <= last`` (sorted and merged), and a
    ``set_by`` of at most 255 characters."""
    checked = check_calendar_name(name)
    if not isinstance(timezone, str) or timezone not in _zones():
        raise InvalidArgumentError(
            f"calendar time zone must be an IANA zone name such as Europe/Berlin, not {timezone!r}"
        )
    if isinstance(dates, (str, bytes)) or not isinstance(dates, Sequence):
        raise InvalidArgumentError("calendar dates must be a list of (first, last) ISO dates")
    if len(dates) > MAX_CALENDAR_RANGES:
        raise InvalidArgumentError(
            f"a calendar holds at most {MAX_CALENDAR_RANGES} date ranges, not {len(dates)}"
        )
    ranges: list[tuple[date, date]] = []
    for pair in dates:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidArgumentError(
                f"a calendar range is a pair of ISO dates (first, last), not {pair!r}"
            )
        first, last = _date(pair[0]), _date(pair[1])
        if last < first:
            raise InvalidArgumentError(f"calendar range {pair[0]}..{pair[1]} ends before it starts")
        ranges.append((first, last))
    if not isinstance(set_by, str) or len(set_by) > MAX_PAUSED_BY_LENGTH:
        raise InvalidArgumentError(
            f"a calendar's set_by must be a string of at most {MAX_PAUSED_BY_LENGTH} characters"
        )
    return checked, timezone, merged_ranges(ranges), set_by
