"""The calendars of a ``ShardedStorage`` (``CalendarStore``): one set for the whole store.

A calendar is shared by recurring jobs on every shard, so it is kept once, in shard 0 (``home``),
as the rate limits are (``sharded/rate_limits.py``): every call goes there, and each shard's
recurring scheduler, handed the whole sharded store, reads them from there once per pass. The
other shards' own calendar keys or rows stay empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_adapters.checks.calendars import check_calendar, check_calendar_name
from storage_adapters.records import CalendarRecord
from storage_adapters.sharded.shard_set import ShardSet

__all__ = ["ShardedCalendarStore"]


class ShardedCalendarStore(ShardSet):
    """Calendars of excluded dates kept in shard 0 for the whole store."""

    def put_calendar(
        self, name: str, timezone: str, dates: Sequence[tuple[str, str]], set_by: str
    ) -> None:
        self.home.put_calendar(*check_calendar(name, timezone, dates, set_by))

    def remove_calendar(self, name: str) -> bool:
        return self.home.remove_calendar(check_calendar_name(name))

    def list_calendars(self) -> list[CalendarRecord]:
        return self.home.list_calendars()

    def get_calendar(self, name: str) -> CalendarRecord | None:
        return self.home.get_calendar(check_calendar_name(name))
