"""Calendars of excluded dates in SQL: the ``CalendarStore`` family of ``SQLStorage``.

A calendar is a row of ``{prefix}_calendars`` (migration 13) whose ranges are a JSON text; it is
written whole by one upsert and read whole, since a recurring pass reads every calendar once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from storage_adapters.checks.calendars import check_calendar, check_calendar_name
from storage_adapters.records import CalendarRecord
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLCalendarStore"]


def _record(row: Any) -> CalendarRecord | None:
    """The calendar of ``row``, or ``None`` for a row written by hand that cannot be read."""
    try:
        ranges = tuple((str(first), str(last)) for first, last in json.loads(row.ranges))
        return CalendarRecord(row.name, row.timezone, ranges, row.set_by, float(row.set_at))
    except (ValueError, TypeError):
        return None


class SQLCalendarStore(SQLPlumbing):
    """Keep calendars of excluded dates, for ``SQLStorage`` to inherit."""

    @rerun_if_ended_idle
    def put_calendar(
        self, name: str, timezone: str, dates: Sequence[tuple[str, str]], set_by: str
    ) -> None:
        name, timezone, ranges, set_by = check_calendar(name, timezone, dates, set_by)
        table = self._tables.calendars
        insert = self._dialect.insert(table).values(
            name=name,
            timezone=timezone,
            ranges=json.dumps(ranges, separators=(",", ":")),
            set_by=set_by,
            set_at=self._dialect.now,
        )
        upsert = insert.on_conflict_do_update(
            index_elements=[table.c.name],
            set_={
                "timezone": insert.excluded.timezone,
                "ranges": insert.excluded.ranges,
                "set_by": insert.excluded.set_by,
                "set_at": insert.excluded.set_at,
            },
        )
        with self._transaction() as conn:
            conn.execute(upsert)

    def remove_calendar(self, name: str) -> bool:
        table = self._tables.calendars
        statement = sa.delete(table).where(table.c.name == check_calendar_name(name))
        return self._changed(statement, {}) > 0

    def list_calendars(self) -> list[CalendarRecord]:
        table = self._tables.calendars
        rows = self._rows(sa.select(table).order_by(table.c.name), {})
        return [record for record in map(_record, rows) if record is not None]

    def get_calendar(self, name: str) -> CalendarRecord | None:
        table = self._tables.calendars
        query = sa.select(table).where(table.c.name == check_calendar_name(name))
        rows = self._rows(query, {})
        return _record(rows[0]) if rows else None
