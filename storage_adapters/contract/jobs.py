"""The families about delayed jobs as callers see them: accepted and managed (``JobStore``),
browsed by people (``BrowseStore``) and deleted once long finished (``RetentionStore``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import JobQuery, JobRecord, JobState, NewJob

__all__ = ["BrowseStore", "JobStore", "RetentionStore"]


@runtime_checkable
class JobStore(Protocol):
    """Delayed jobs as callers see them: accept, read, cancel, reschedule, count (listing is
    ``BrowseStore.list_jobs_page``; ``storage_adapters.paging`` walks it)."""

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        """Durably store ``jobs``, all or nothing, in one round trip where the backend allows.

        Returns, per job, ``True`` if it was stored and ``False`` if a job with that id already
        existed (in any state); an existing job is left exactly as it was. Ids within one call
        must be distinct.
        """

    def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, in any state."""

    def cancel(self, job_id: str) -> bool:
        """``SCHEDULED`` -> ``CANCELLED``; ``False`` if the job is missing or not scheduled."""

    def reschedule(self, job_id: str, due_at: float) -> bool:
        """Move a ``SCHEDULED`` job's due time, or make a ``FAILED`` job ``SCHEDULED`` again at
        ``due_at`` with its attempts reset to 0 (``last_error`` kept, for the record); ``False``
        if it is missing or in another state. A failed unique job whose key another job holds
        meanwhile (``UniqueJobStore``) raises ``RecordExistsError`` naming the key, unchanged."""

    def count_by_state(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zeros included)."""


@runtime_checkable
class RetentionStore(Protocol):
    """Deleting old finished jobs, so storage does not grow with every job ever released."""

    def purge_finished(
        self, states: Iterable[JobState | str], older_than: float, limit: int
    ) -> int:
        """Delete at most ``limit`` jobs in the finished ``states`` (enqueued, cancelled,
        expired; ``SCHEDULED`` or ``CLAIMED`` raise ``InvalidArgumentError``) whose ``updated_at``
        (when they reached that state) is before ``older_than`` (storage-clock epoch seconds),
        oldest first within each state, states in the order given. Returns how many.

        One bounded step served by an index on finish time, never a scan, so the lock holder can
        run it between passes; every index the job was in shrinks with it.
        """


@runtime_checkable
class BrowseStore(Protocol):
    """Reading the store for people (the web dashboard): jobs page by page under filters, and
    how many jobs finished per time bucket. Both served by indexes, fast with millions of jobs."""

    def list_jobs_page(self, query: JobQuery, limit: int) -> list[JobRecord]:
        """Up to ``limit`` (1-1000) jobs matching ``query``, ordered by ``(due_at, id)``
        ascending, starting strictly after ``query.after``: keyset pagination, never an offset.

        Paging on with ``after`` set to the last row's ``(due_at, id)`` yields every matching job
        exactly once (jobs that change meanwhile may move). Ties on ``due_at`` are ordered by id
        in the backend's order (bytes on Redis, the column's collation in SQL). A page shorter
        than ``limit`` is the last one.
        """

    def finished_counts(
        self, state: JobState, since: float, bucket: float
    ) -> list[tuple[float, int]]:
        """How many jobs reached the finished ``state`` (enqueued, cancelled, expired; others
        raise ``InvalidArgumentError``) in each ``bucket`` seconds from ``since`` to now (storage
        clock): ``(start, count)`` for every bucket ``[since + k*bucket, since + (k+1)*bucket)``
        that has started, zeros included, oldest first; ``[]`` when ``since`` is in the future.
        At most 10,000 buckets. Counted on the finish-time index retention uses.
        """
