"""Walking the browse family's keyset pages: every job a query matches, in ``(due_at, id)``
order, and the offset listing ``Client.list`` and ``parallel-scheduler list`` offer on top.

The contract has one way to list jobs (``BrowseStore.list_jobs_page``); an offset is served by
walking pages from the start, which costs what an SQL ``OFFSET`` costs, on every backend alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

from storage_adapters.checks.browse import MAX_PAGE
from storage_adapters.checks.values import non_negative_offset, positive_count
from storage_adapters.contract.jobs import BrowseStore
from storage_adapters.records import JobQuery, JobRecord, JobState

__all__ = ["job_order", "list_jobs", "walk_jobs"]


def job_order(job: JobRecord) -> tuple[float, str]:
    """The key pages are ordered by, and the ``after`` of the page that follows ``job``."""
    return (job.due_at, job.id)


def walk_jobs(store: BrowseStore, query: JobQuery, page: int = MAX_PAGE) -> Iterator[JobRecord]:
    """Every job matching ``query`` (from ``query.after`` on), ``page`` jobs per round trip,
    read lazily: stop iterating and no further page is read."""
    after = query.after
    while True:
        rows = store.list_jobs_page(replace(query, after=after), page)
        yield from rows
        if len(rows) < page:  # the contract: a short page is the last one
            return
        after = job_order(rows[-1])


def list_jobs(
    store: BrowseStore, state: JobState | None, limit: int, offset: int = 0
) -> list[JobRecord]:
    """Up to ``limit`` jobs (of one ``state``, or all) after skipping ``offset``, in
    ``(due_at, id)`` order; a bad ``limit`` or ``offset`` raises ``InvalidArgumentError``."""
    positive_count("limit", limit)
    non_negative_offset(offset)
    page = min(MAX_PAGE, offset + limit)
    walked = walk_jobs(store, JobQuery(state=state), page)
    return list(itertools.islice(walked, offset, offset + limit))
