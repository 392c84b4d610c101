"""Calendars of excluded dates, as the recurring planner uses them: which ticks do not fire.

A calendar (``storage_adapters.CalendarRecord``, kept by the store's ``CalendarStore``) is a
name, an IANA zone and inclusive ranges of local dates. A recurring job naming calendars in its
schedule's ``exclude`` does not fire a tick whose local date *in each calendar's own zone* falls
in one of its ranges; such a tick is neither fired nor counted as missed, and the job's next run
is its first tick that is not excluded (``recurring/misfires.py``).

Skipping never walks an excluded range tick by tick: a tick inside a range jumps to the first
instant after it (local midnight of the day after the range) or, walking back, to the last
instant before it, so a schedule firing every second beside a year-long range costs one jump.

Also here: ``parse_ics``, a small reader of the all-day and timed events of an iCalendar file
(RFC 5545), for ``parallel-scheduler calendar import``, ``Client.import_calendar`` and the
dashboard's Calendars page; and the reading of typed dates (``date_words``, ``parse_dates``) and
the messages every door shares (``calendar_summary``, ``removed_text``).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.pausing import pauser
from parallel_scheduler.ranges import instant
from storage_adapters import CalendarRecord, InvalidArgumentError, Storage
from storage_adapters.checks.calendars import check_calendar, check_calendar_name

__all__ = [
    "Calendar",
    "CalendarKeeping",
    "Exclusion",
    "before",
    "calendar_names",
    "calendar_ranges",
    "calendar_summary",
    "calendar_view",
    "calendars_of",
    "check_exclude",
    "date_words",
    "ics_ranges",
    "parse_dates",
    "parse_ics",
    "removed_text",
]

T = TypeVar("T")


def check_exclude(names: object) -> tuple[str, ...]:
    """A schedule's ``exclude``: calendar names, each checked as storage checks them, as a tuple
    without repeats (a stored schedule's JSON list becomes one, so the schedule stays hashable).
    Whether each calendar exists is the saving door's question (``Client``), not the schedule's."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise InvalidJobError(f"exclude must be a list of calendar names, not {names!r}")
    try:
        return tuple(dict.fromkeys(check_calendar_name(name) for name in names))
    except InvalidArgumentError as exc:
        raise InvalidJobError(str(exc)) from None


@dataclass(frozen=True)
class Calendar:
    """One calendar ready for planning: its zone, and its merged ranges as date ordinals
    (``firsts[i]..lasts[i]``, inclusive, sorted) for a binary search per tick."""

    name: str
    zone: ZoneInfo
    firsts: tuple[int, ...]
    lasts: tuple[int, ...]

    @classmethod
    def of(cls, record: CalendarRecord) -> Calendar:
        ranges = sorted(
            (date.fromisoformat(first).toordinal(), date.fromisoformat(last).toordinal())
            for first, last in record.ranges
        )
        return cls(
            record.name,
            ZoneInfo(record.timezone),
            tuple(first for first, _ in ranges),
            tuple(last for _, last in ranges),
        )

    def span(self, tick: float) -> tuple[float, float] | None:
        """The excluded range holding ``tick``'s local date, as the instants of its first
        day's start and of the start of the day after its last; ``None``: not excluded."""
        day = datetime.fromtimestamp(tick, self.zone).date().toordinal()
        at = bisect.bisect_right(self.firsts, day) - 1
        if at < 0 or self.lasts[at] < day:
            return None
        return self._midnight(self.firsts[at]), self._midnight(self.lasts[at] + 1)

    def _midnight(self, ordinal: int) -> float:
        """The first instant of local date ``ordinal`` (a midnight inside a DST gap: the
        transition, where that date begins)."""
        day = date.fromordinal(min(ordinal, date.max.toordinal()))
        return datetime(day.year, day.month, day.day, tzinfo=self.zone).timestamp()


def calendars_of(records: Iterable[CalendarRecord]) -> dict[str, Calendar]:
    """Calendars by name, as a recurring pass reads them once from storage; a record that cannot
    be read (written by hand) is left out, as if the calendar were empty."""
    found: dict[str, Calendar] = {}
    for record in records:
        try:
            found[record.name] = Calendar.of(record)
        except (ValueError, KeyError, OverflowError):
            continue
    return found


@dataclass(frozen=True)
class Exclusion:
    """The calendars one schedule excludes (those of its names that exist)."""

    calendars: tuple[Calendar, ...]

    @classmethod
    def of(cls, names: Iterable[str], calendars: Mapping[str, Calendar]) -> Exclusion | None:
        """The exclusion of ``names`` among ``calendars``; ``None`` when none of them exists."""
        found = tuple(calendars[name] for name in names if name in calendars)
        return cls(found) if found else None

    def span(self, tick: float) -> tuple[float, float] | None:
        """An excluded span holding ``tick`` (see ``Calendar.span``), or ``None``."""
        for calendar in self.calendars:
            span = calendar.span(tick)
            if span is not None:
                return span
        return None

    def excludes(self, tick: float) -> bool:
        return self.span(tick) is not None


def before(instant: float) -> float:
    """The float just before ``instant``: a walk "strictly after" it then includes it."""
    return math.nextafter(instant, -math.inf)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SEPARATORS = re.compile(r"[\s,]+")


def date_words(texts: Iterable[str]) -> list[str]:
    """The dates or ranges typed in ``texts``, separated by commas or white space (``--dates
    2026-12-25,2026-12-26`` on the command line, a text area in the dashboard)."""
    return [word for text in texts for word in _SEPARATORS.split(text) if word]


def parse_dates(dates: Iterable[str] = (), ranges: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Calendar ranges from the command line's words: ``dates`` are single ISO dates (each a
    range of one day), ``ranges`` are ``FIRST..LAST``. The store checks the dates themselves."""
    found = [(day.strip(), day.strip()) for day in dates if day.strip()]
    for text in ranges:
        first, dots, last = text.strip().partition("..")
        found.append((first.strip(), last.strip()) if dots else (text.strip(), ""))
    return found


def _unfolded(text: str) -> Iterator[str]:
    """Content lines with RFC 5545 folding undone (a line starting with a space or a tab
    continues the one before)."""
    line = ""
    for raw in text.splitlines():
        if raw[:1] in (" ", "\t") and line:
            line += raw[1:]
            continue
        if line:
            yield line
        line = raw
    if line:
        yield line


def _ics_date(value: str, params: str, default_zone: ZoneInfo) -> tuple[date, bool]:
    """The local date of a DTSTART/DTEND value, and whether it was an all-day date. A date-time
    takes its local date in its TZID (or UTC for a trailing ``Z``, else ``default_zone``)."""
    value = value.strip()
    if len(value) == 8 and value.isdigit():
        return datetime.strptime(value, "%Y%m%d").date(), True
    moment = datetime.strptime(value.rstrip("Z")[:15], "%Y%m%dT%H%M%S")
    zone_id = re.search(r"TZID=([^;:]+)", params)
    if value.endswith("Z"):
        return moment.replace(tzinfo=timezone.utc).astimezone(default_zone).date(), False
    if zone_id:
        try:
            zone = ZoneInfo(zone_id.group(1).strip('"'))
            return moment.replace(tzinfo=zone).astimezone(default_zone).date(), False
        except (KeyError, ValueError):
            pass  # a TZID of the file's own VTIMEZONE: its wall time is the local time
    return moment.date(), False


def parse_ics(text: str, zone: str) -> list[tuple[str, str]]:
    """The excluded ranges of the ``VEVENT``s of an iCalendar text, in ``zone``. An all-day
    event's ``DTEND`` is exclusive (RFC 5545: ``DTSTART;VALUE=DATE:20261225`` with
    ``DTEND;VALUE=DATE:20261226`` is one day); without one it lasts its start day. A timed event
    excludes the local dates from its start's to its end's (an end at midnight sharp excludes
    nothing of that day). Raises ``ValueError`` naming the line that cannot be read."""
    local = ZoneInfo(zone)
    found: list[tuple[str, str]] = []
    start: tuple[date, bool] | None = None
    end: tuple[date, bool] | None = None
    end_raw = ""
    inside = False
    for line in _unfolded(text):
        name_part, _, value = line.partition(":")
        name, _, params = name_part.partition(";")
        name = name.upper()
        if name == "BEGIN" and value.strip().upper() == "VEVENT":
            inside, start, end, end_raw = True, None, None, ""
        elif inside and name in ("DTSTART", "DTEND"):
            try:
                parsed = _ics_date(value, params, local)
            except ValueError:
                raise ValueError(f"cannot read the date of {line!r}") from None
            if name == "DTSTART":
                start = parsed
            else:
                end, end_raw = parsed, value.strip()
        elif inside and name == "END" and value.strip().upper() == "VEVENT":
            inside = False
            if start is None:
                raise ValueError("an event (VEVENT) has no DTSTART")
            first, all_day = start
            last = first
            if end is not None:
                last = (
                    end[0] - timedelta(days=1) if all_day or end_raw.endswith("T000000") else end[0]
                )
                last = max(last, first)
            found.append((first.isoformat(), last.isoformat()))
    return found


def ics_ranges(name: str, ics: str, timezone: str) -> list[tuple[str, str]]:
    """The ranges of iCalendar text ``ics`` for calendar ``name`` in ``timezone`` (``parse_ics``),
    the name and zone checked first in storage's words; a text that cannot be read raises
    ``InvalidArgumentError`` naming the line, before anything is written."""
    zone = check_calendar(name, timezone, [], "")[1]
    try:
        return parse_ics(ics, zone)
    except ValueError as exc:
        raise InvalidArgumentError(f"cannot import calendar {name!r}: {exc}") from None


def calendar_names(words: Iterable[str]) -> tuple[str, ...]:
    """Calendar names from repeated or comma-separated words (``--exclude a,b --exclude c``)."""
    return tuple(name.strip() for word in words for name in word.split(",") if name.strip())


def calendar_ranges(dates: Iterable[str | tuple[str, str]]) -> list[tuple[str, str]]:
    """``Client.put_calendar``'s dates as ranges: ``"2026-12-25"`` (one day),
    ``"2026-12-24..2026-12-31"`` (inclusive) or a ``(first, last)`` pair."""
    found: list[tuple[str, str]] = []
    for item in dates:
        if isinstance(item, str):
            found.extend(parse_dates(ranges=[item]) if ".." in item else parse_dates([item]))
        else:
            found.append(item)
    return found


def calendar_view(record: CalendarRecord) -> dict[str, Any]:
    """One calendar as a JSON-ready dict (``calendar list --json``, ``GET /api/v1/calendars``):
    ``ranges`` as ``[first, last]`` ISO dates, ``set_at`` ISO 8601 UTC."""
    return {
        "name": record.name,
        "timezone": record.timezone,
        "ranges": [list(pair) for pair in record.ranges],
        "days": sum(
            date.fromisoformat(last).toordinal() - date.fromisoformat(first).toordinal() + 1
            for first, last in record.ranges
        ),
        "set_by": record.set_by,
        "set_at": instant("set_at", record.set_at, []),
    }


def calendar_summary(view: Mapping[str, Any]) -> str:
    """What a saved calendar holds, as the command line and the dashboard say it."""
    return f"{len(view['ranges']):,} range(s), {view['days']:,} day(s) in {view['timezone']}"


def removed_text(name: str, removed: bool, naming: int) -> str:
    """What removing calendar ``name`` did, with how many recurring jobs still name it (they
    fire as if it were empty), as the command line and the dashboard say it."""
    if not removed:
        return f"no calendar {name!r}: nothing changed"
    tail = (
        f"; {naming} recurring job(s) still name it and fire as if it were empty" if naming else ""
    )
    return f"removed calendar {name!r}{tail}"


class CalendarKeeping:
    """The ``Client``'s calendar methods (the client supplies ``storage``, ``retry_for`` and
    ``_verify_shards``). Bad input raises ``InvalidArgumentError`` before anything is written."""

    storage: Storage
    retry_for: float

    def _verify_shards(self) -> None:
        """The client's check of the store's shard count, before its first write."""

    def _calendar_call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self.retry_for)

    def put_calendar(
        self,
        name: str,
        dates: Iterable[str | tuple[str, str]],
        timezone: str = "UTC",
        by: str | None = None,
    ) -> CalendarRecord:
        """Create calendar ``name`` or replace it whole: recurring jobs naming it in
        ``exclude`` do not fire on these local dates of ``timezone``.

        :param dates: ``"2026-12-25"``, ``"2026-12-24..2026-12-31"`` or ``(first, last)``
            pairs (at most 10,000 ranges; overlapping ones are merged).
        :param timezone: the IANA zone whose local dates are excluded.
        :param by: who set it (at most 255 characters); default ``user@host``.
        :returns: the calendar as stored.
        """
        checked = check_calendar(name, timezone, calendar_ranges(dates), pauser(by))
        self._verify_shards()
        self._calendar_call(lambda: self.storage.put_calendar(*checked))
        stored = self._calendar_call(lambda: self.storage.get_calendar(checked[0]))
        assert stored is not None
        return stored

    def import_calendar(
        self, name: str, ics: str, timezone: str = "UTC", by: str | None = None
    ) -> CalendarRecord:
        """``put_calendar`` with the events of an iCalendar text (``parse_ics``); a text that
        cannot be read raises ``InvalidArgumentError`` naming the line."""
        return self.put_calendar(name, ics_ranges(name, ics, timezone), timezone, by)

    def remove_calendar(self, name: str) -> bool:
        """Delete calendar ``name``; ``False`` when there was none. Recurring jobs that still
        name it are kept and fire as if it were empty (each pass logs a warning)."""
        checked = check_calendar_name(name)
        self._verify_shards()
        return self._calendar_call(lambda: self.storage.remove_calendar(checked))

    def calendars(self) -> list[CalendarRecord]:
        """Every calendar, by name."""
        return self._calendar_call(self.storage.list_calendars)

    def calendar(self, name: str) -> CalendarRecord | None:
        """Calendar ``name``, or ``None``."""
        checked = check_calendar_name(name)
        return self._calendar_call(lambda: self.storage.get_calendar(checked))
