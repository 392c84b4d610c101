"""Browsing on Redis: the part of ``RedisStorage`` that pages through jobs under filters and counts
finished jobs per time bucket (``BrowseStore`` in ``base.py``).

Pages walk the indexes the adapter already keeps by due time (``all`` for every job, ``schedule``
and ``state:<state>`` per state): a due range is a score range, and ``after`` a rank found by a
binary search within its tie group (members of equal score are in byte order in a sorted set, the
id order the contract promises), so a page never scans what comes before it. A task filter is
checked on the members walked: ``lua/list_jobs_page.lua`` examines at most ``PAGE_BUDGET``
members per call, and this module calls it again from the last one until the page is full or the
index ends, so a rare task never blocks the server for long (the page is then read in several
snapshots, as any two pages are). The id prefix, task prefix and error text filters are checked
the same way, as bytes (the id prefix on the member itself, before the job is read). Finish counts
are one ``ZCOUNT`` per bucket on the ``finished:<state>`` indexes retention keeps
(``lua/finished_counts.lua``).
"""

from __future__ import annotations

from storage_adapters.checks.browse import (
    Buckets,
    check_job_query,
    check_page_limit,
    count_finished,
)
from storage_adapters.records import JobQuery, JobRecord, JobState
from storage_adapters.redis.jobs import _record
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["BROWSE_SCRIPTS", "PAGE_BUDGET", "RedisBrowseStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
BROWSE_SCRIPTS = ("list_jobs_page", "finished_counts")
#: Members one page script examines at most before handing back (a bound on its run time).
PAGE_BUDGET = 2000


def _bound(value: float | None) -> str:
    return "" if value is None else repr(value)


class RedisBrowseStore(RedisPlumbing):
    """Filtered keyset pages and finish counts, for ``RedisStorage`` to inherit."""

    def list_jobs_page(self, query: JobQuery, limit: int) -> list[JobRecord]:
        checked = check_job_query(query)
        wanted = check_page_limit(limit)
        index = self._key("all") if checked.state is None else self._state_key(checked.state)
        after = checked.after
        page: list[JobRecord] = []
        while True:
            args: list[str | int] = [
                self._key("job:"),
                _bound(checked.due_from),
                _bound(checked.due_to),
                "" if after is None else repr(after[0]),
                "" if after is None else after[1],
                checked.task or "",
                wanted - len(page),
                PAGE_BUDGET,
                checked.id_prefix or "",
                checked.task_prefix or "",
                checked.error_contains or "",
            ]
            more, last_due, last_id, rows = self._run("list_jobs_page", [index], args)
            page += (_record(row[0], row[1:]) for row in rows)
            if not int(more) or len(page) >= wanted:
                return page
            after = (float(last_due), last_id)

    def finished_counts(
        self, state: JobState, since: float, bucket: float
    ) -> list[tuple[float, int]]:
        return count_finished(state, since, bucket, self.now, self._finished_per_bucket)

    def _finished_per_bucket(self, chosen: JobState, buckets: Buckets) -> list[int]:
        args: list[str | int] = [repr(buckets.since), repr(buckets.width), buckets.count]
        counts = self._run("finished_counts", [self._finished_key(chosen)], args)
        return [int(n) for n in counts]
