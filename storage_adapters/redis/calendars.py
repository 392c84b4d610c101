"""Calendars of excluded dates on Redis (``CalendarStore``): the part of ``RedisStorage`` that
keeps them.

Key: ``calendars`` (hash: ``<name>`` -> ``<set_at> <JSON [timezone, set_by, ranges]>``), one key
under the prefix's hash tag like every other, so on a Redis Cluster it lives in the store's slot.
A calendar is written whole by one ``HSET`` (after ``WAIT`` for replicas when the URL asks) and
a recurring pass reads every calendar with one ``HGETALL``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from storage_adapters.checks.calendars import check_calendar, check_calendar_name
from storage_adapters.records import CalendarRecord
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["RedisCalendarStore"]


def _record(name: str, value: str) -> CalendarRecord | None:
    """A calendar as ``put_calendar`` stores it, or ``None`` for a value written by hand that
    cannot be read (listing must not crash)."""
    set_at, _, rest = value.partition(" ")
    try:
        timezone, set_by, ranges = json.loads(rest)
        pairs = tuple((str(first), str(last)) for first, last in ranges)
        return CalendarRecord(name, str(timezone), pairs, str(set_by), float(set_at))
    except (ValueError, TypeError):
        return None


class RedisCalendarStore(RedisPlumbing):
    """Keep calendars of excluded dates, for ``RedisStorage`` to inherit."""

    def put_calendar(
        self, name: str, timezone: str, dates: Sequence[tuple[str, str]], set_by: str
    ) -> None:
        name, timezone, ranges, set_by = check_calendar(name, timezone, dates, set_by)
        value = f"{self.now()!r} {json.dumps([timezone, set_by, ranges], separators=(',', ':'))}"
        self._write("hset", name, value)

    def remove_calendar(self, name: str) -> bool:
        return bool(self._write("hdel", check_calendar_name(name)))

    def list_calendars(self) -> list[CalendarRecord]:
        with self._talking() as client:
            stored = client.hgetall(self._key("calendars"))
        found = (_record(name, value) for name, value in stored.items())
        return sorted((r for r in found if r is not None), key=lambda record: record.name)

    def get_calendar(self, name: str) -> CalendarRecord | None:
        checked = check_calendar_name(name)
        with self._talking() as client:
            value = client.hget(self._key("calendars"), checked)
        return None if value is None else _record(checked, value)

    def _write(self, command: str, *args: str) -> int:
        """``HSET`` or ``HDEL`` of the calendars' hash, acknowledged by the replicas the URL asks
        for (as every other write of the store)."""
        key = self._key("calendars")
        with self._talking() as client:
            if self._link.target.wait_replicas:
                return int(self._replicated(lambda pipe: getattr(pipe, command)(key, *args)))
            return int(getattr(client, command)(key, *args))
