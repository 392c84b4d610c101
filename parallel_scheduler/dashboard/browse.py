"""Finding jobs for the pages: the filters of the Jobs page and keyset paging through storage.

Storage serves state, task, task prefix, id prefix and due-time range (``list_jobs_page``, ordered
by ``(due_at, id)``, never OFFSET). Three filters are not in any index and could cost a walk of
every job: the queue (stored with the job, or in an older one's options), "has a last error" and the
text a last error contains. For those the page is filtered here, fetching more pages until it is
full or ``SCAN_BOUND`` rows were read; the page then says how many rows it searched, and its "next"
link continues after the last row *read*, so nothing is skipped. (Storage could filter on the error
text itself, ``JobQuery.error_contains``, but with no bound on the rows it walks.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.queues import record_queue
from storage_adapters import BrowseStore, JobQuery, JobRecord, JobState
from storage_adapters.checks.browse import MAX_PAGE

__all__ = [
    "COUNT_BOUND",
    "SCAN_BOUND",
    "JobFilter",
    "Page",
    "count_matches",
    "count_upto",
    "fetch_page",
    "matching",
]

#: Rows read at most for one page when the queue or error filter is on (a page must render in
#: well under 300 ms whatever the store holds).
SCAN_BOUND = 2_000
#: Rows a page counts at most when no index counts them ("more than N" beyond).
COUNT_BOUND = 1_000
#: Rows asked of storage at once while scanning.
_BATCH = 500


@dataclass(frozen=True)
class JobFilter:
    state: JobState | None = None
    task: str | None = None
    queue: str | None = None
    has_error: bool = False
    due_from: float | None = None
    due_to: float | None = None
    id_prefix: str | None = None
    task_prefix: str | None = None
    error_contains: str | None = None

    @property
    def state_only(self) -> bool:
        """Whether only the state filters (``count_by_state`` then counts exactly)."""
        return not self.scans and self.query() == JobQuery(state=self.state)

    @property
    def scans(self) -> bool:
        """Whether rows are filtered here (not by storage), so a page may read many rows."""
        return self.queue is not None or self.has_error or self.error_contains is not None

    def query(self, after: tuple[float, str] | None = None) -> JobQuery:
        """What storage filters on (all but the queue and the error filters)."""
        return JobQuery(
            state=self.state,
            task=self.task,
            due_from=self.due_from,
            due_to=self.due_to,
            after=after,
            id_prefix=self.id_prefix,
            task_prefix=self.task_prefix,
        )

    def keeps(self, record: JobRecord) -> bool:
        """Whether ``record`` passes the filters storage does not check (``query``'s are)."""
        error = record.last_error
        if self.has_error and not error:
            return False
        if self.error_contains is not None and (error is None or self.error_contains not in error):
            return False
        return self.queue is None or record_queue(record) == self.queue


@dataclass(frozen=True)
class Page:
    rows: list[JobRecord]
    #: ``(due_at, id)`` to continue from, ``None`` on the last page
    next_after: tuple[float, str] | None
    scanned: int
    #: the scan stopped at ``SCAN_BOUND`` rows before the page was full
    bounded: bool


def _read(retry_for: float, fn: Callable[[], Any]) -> Any:
    return call_storage(fn, give_up_after=retry_for)


def _batches(
    storage: BrowseStore, query: JobQuery, size: int, retry_for: float
) -> Iterator[list[JobRecord]]:
    """Pages of ``query`` from storage, each continuing after the previous one's last row."""
    while True:
        batch: list[JobRecord] = _read(retry_for, partial(storage.list_jobs_page, query, size))
        if not batch:
            return
        yield batch
        if len(batch) < size:
            return
        query = replace(query, after=(batch[-1].due_at, batch[-1].id))


def fetch_page(
    storage: BrowseStore,
    jobs: JobFilter,
    after: tuple[float, str] | None,
    limit: int,
    retry_for: float,
    scan_bound: int = SCAN_BOUND,
) -> Page:
    """One page of at most ``limit`` matching rows after ``after``."""
    if not jobs.scans:
        rows = _read(retry_for, lambda: storage.list_jobs_page(jobs.query(after), limit + 1))
        more = len(rows) > limit
        rows = rows[:limit]
        last = (rows[-1].due_at, rows[-1].id) if more and rows else None
        return Page(rows, last, len(rows), False)
    kept: list[JobRecord] = []
    scanned = 0
    last_read: tuple[float, str] | None = None
    exhausted = True
    for batch in _batches(storage, jobs.query(after), _BATCH, retry_for):
        for record in batch:
            scanned += 1
            last_read = (record.due_at, record.id)
            if jobs.keeps(record):
                kept.append(record)
            if len(kept) == limit or scanned >= scan_bound:
                exhausted = False
                break
        if not exhausted:
            break
    bounded = not exhausted and len(kept) < limit
    return Page(kept, None if exhausted else last_read, scanned, bounded)


def matching(
    storage: BrowseStore, jobs: JobFilter, bound: int, retry_for: float, scan_bound: int
) -> tuple[list[JobRecord], bool]:
    """Up to ``bound`` matching rows from the start, and whether more may exist (the bound or
    the scan bound was reached)."""
    kept: list[JobRecord] = []
    scanned = 0
    for batch in _batches(storage, jobs.query(), _BATCH, retry_for):
        for record in batch:
            scanned += 1
            if jobs.keeps(record):
                kept.append(record)
            if len(kept) >= bound or scanned >= scan_bound:
                return kept, True
    return kept, False


def count_upto(storage: BrowseStore, query: JobQuery, bound: int, retry_for: float) -> int:
    """How many rows ``query`` matches, counting no further than ``bound`` (bounded reads of at
    most ``MAX_PAGE`` rows each)."""
    counted = 0
    for batch in _batches(storage, query, min(bound, MAX_PAGE), retry_for):
        counted += len(batch)
        if counted >= bound:
            return bound
    return counted


def count_matches(
    storage: BrowseStore,
    by_state: Callable[[], Mapping[JobState, int]],
    jobs: JobFilter,
    retry_for: float,
    bound: int = COUNT_BOUND,
) -> tuple[int, bool] | None:
    """How many jobs ``jobs`` matches and whether that is exact: from ``by_state`` (storage's
    ``count_by_state``) when only the state filters, else counted no further than ``bound``
    (``(bound, False)`` means "more than"); ``None`` when rows are filtered here (counting
    would be a scan)."""
    if jobs.scans:
        return None
    if jobs.state_only:
        counts: Mapping[JobState, int] = _read(retry_for, by_state)
        if jobs.state is None:
            return sum(counts.values()), True
        return int(counts.get(jobs.state, 0)), True
    counted = count_upto(storage, jobs.query(), bound + 1, retry_for)
    return (bound, False) if counted > bound else (counted, True)
