"""The storage contract every adapter implements (its records are in ``records``, its errors in
``errors``).

This package is a leaf: it never imports ``parallel_scheduler``. A job reaches storage as an opaque,
already-serialised ``payload`` (the message the dispatcher will send), so an adapter never needs to
understand Celery, and a message is serialised once, when the job is accepted.

Time is a float of seconds since the Unix epoch (UTC) read from the storage server's clock
(PostgreSQL ``now()``, Redis ``TIME``, the local clock for SQLite), so scheduler hosts with
skewed clocks agree on what is due. Durations are float seconds.

Releasing a job is a three-step hand-off that never marks a job Enqueued before it was sent:

1. **claim** (one id under its per-job lock, or a whole due batch in one statement): the job leaves
   the due set and becomes ``CLAIMED`` with a lease and the claimer's fencing token;
2. the scheduler hands the payload to the worker system;
3. **mark_enqueued** (sent) or **unclaim** (the hand-off failed; the job is due again at once);
   a job its dispatcher cannot send (``UnsendableJobError``) is **back_off** (due again later, on
   its own) or, after its last attempt, **fail** (set aside as ``FAILED``).

A claimer that dies between 1 and 3 leaves a claim whose lease runs out; the next lock holder's
``recover_expired_claims`` makes it due again. So a crash can send a job twice (at most the jobs in
flight at the crash), and can never lose one.

The contract reads as eight small ones, each a ``Protocol`` of its own, which ``Storage`` joins:
``StorageAdmin`` (schema, clock, connections), ``JobStore`` (accept and manage delayed jobs),
``ReleaseStore`` (the hand-off above), ``LockStore`` (the fenced distributed lock),
``RecurringStore`` (recurring jobs and their firings), ``InstanceStore`` (which scheduler
processes are alive), ``RetentionStore`` (deleting old finished jobs) and ``BrowseStore``
(filtered keyset pages and finish counts, for the dashboard). A part of the core that
needs one family can say so in its signature.

Bad input is refused before anything is written, with an error of the tree in ``errors``:
``InvalidArgumentError`` (a ``ValueError``) for an argument out of range, ``InvalidRecordError``
for a record that breaks the contract, ``InvalidIdentifierError`` for an unsafe id or name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import (
    ClaimedJob,
    Firing,
    InstanceRecord,
    JobQuery,
    JobRecord,
    JobState,
    LockLease,
    ManualFiring,
    NewJob,
    NewRecurring,
    RecurringRecord,
    SaveMode,
)

__all__ = [
    "BrowseStore",
    "InstanceStore",
    "JobStore",
    "ListReleasingStorage",
    "LockStore",
    "RecurringStore",
    "ReleaseStore",
    "RetentionStore",
    "Storage",
    "StorageAdmin",
]


@runtime_checkable
class ListReleasingStorage(Protocol):
    """An optional ability beyond ``Storage``: release due jobs straight onto the lists of a
    Redis-list broker that lives on the storage's own server, in one atomic step per batch.

    Only jobs with an ``envelope`` (``<list key>\n<message>``) move that way; the others come
    back claimed, for the usual send -> ``mark_enqueued``. The lease is checked as in
    ``claim_due``.
    """

    def server_identity(self) -> str:
        """Equal for two connections exactly when they reach the same server process."""

    def release_to_lists(
        self, limit: int, lock: LockLease, lease: float, list_db: int
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """``(moved, claimed)``: jobs pushed onto database ``list_db`` and Enqueued (reported
        without payload or envelope, which they no longer need), then the claimed rest; each
        earliest due first."""


class ChunkSettlement(Protocol):
    """The writes that end some of a chunk's claims otherwise than Enqueued, made inside the
    transaction that claimed them (see ``TransactionalReleaseStorage``)."""

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims become ``EXPIRED`` with ``reason`` (their message was never sent)."""

    def unclaim(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims were not sent: ``SCHEDULED`` again, due at once, with ``reason``."""

    def back_off(self, claims: Sequence[ClaimedJob], reason: str, delay: float) -> None:
        """These claims cannot be sent for now: ``SCHEDULED`` again, due ``delay`` seconds from
        now (storage clock), with ``reason``."""

    def fail(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        """These claims cannot be sent at all: set aside as ``FAILED``, with ``reason``."""


@runtime_checkable
class TransactionalReleaseStorage(Protocol):
    """An optional ability beyond ``Storage``: claim a chunk, send it and settle it in one
    database transaction, so a chunk costs one row write per job and no mark statement.

    The claim takes each row's lock (``FOR UPDATE SKIP LOCKED``, so concurrent claimers skip
    each other's rows) and writes it ``ENQUEUED`` at once; ``send`` runs while the transaction
    is open, and writes what it did not send through the ``ChunkSettlement``; the commit then
    makes the chunk's fate durable in one step. A crash or a lost connection before the commit
    rolls the whole chunk back to ``SCHEDULED``: nothing is lost, and what was already sent may
    be sent again (at most the chunks in flight, as with a crash between send and mark). A
    client stalled inside the transaction is ended by the server (PostgreSQL's idle-in-
    transaction timeout), with the same outcome.
    """

    #: Seconds ``send`` may spend inside the transaction before it must stop sending and give
    #: the rest back (well inside the server's idle-in-transaction timeout).
    send_budget: float

    def release_in_transaction(
        self,
        job_ids: Sequence[str],
        lock: LockLease,
        send: Callable[[list[ClaimedJob], ChunkSettlement], None],
    ) -> list[ClaimedJob]:
        """Claim those of ``job_ids`` that are still due and not locked by another claimer
        (only while ``lock`` is the held lease, as ``claim_due``), call ``send`` with them
        (earliest due first), then commit; returns the claims. ``send`` raising rolls back
        every write of the chunk and the error propagates; a failed commit raises the
        contract's ``StorageError``: then no write of the chunk happened."""


@runtime_checkable
class StorageAdmin(Protocol):
    """Schema, clock and connections."""

    def setup(self) -> None:
        """Create or upgrade the schema. Idempotent; safe to run from several processes."""

    def now(self) -> float:
        """The storage server's clock, in epoch seconds."""

    def close(self) -> None:
        """Release connections. The adapter is unusable afterwards."""

    def drop(self) -> None:
        """Delete every table or key under this adapter's prefix (uninstall, test clean-up)."""


@runtime_checkable
class JobStore(Protocol):
    """Delayed jobs as callers see them: accept, read, list, cancel, reschedule, count."""

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        """Durably store ``jobs``, all or nothing, in one round trip where the backend allows.

        Returns, per job, ``True`` if it was stored and ``False`` if a job with that id already
        existed (in any state); an existing job is left exactly as it was. Ids within one call
        must be distinct.
        """

    def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, in any state."""

    def list_jobs(self, state: JobState | None, limit: int, offset: int = 0) -> list[JobRecord]:
        """Jobs (of one state, or all), ordered by ``due_at`` then ``id``, paged by offset."""

    def cancel(self, job_id: str) -> bool:
        """``SCHEDULED`` -> ``CANCELLED``; ``False`` if the job is missing or not scheduled."""

    def reschedule(self, job_id: str, due_at: float) -> bool:
        """Move a ``SCHEDULED`` job's due time, or make a ``FAILED`` job ``SCHEDULED`` again at
        ``due_at`` with its attempts reset to 0 (``last_error`` kept, for the record); ``False``
        if it is missing or in another state."""

    def count_by_state(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zeros included)."""


@runtime_checkable
class ReleaseStore(Protocol):
    """The release hand-off (claim -> send -> mark_enqueued or unclaim), fenced by a ``lock``
    that must still be current, and the recovery of claims whose lease ran out."""

    def fetch_due_ids(self, limit: int) -> list[str]:
        """Up to ``limit`` ids of ``SCHEDULED`` jobs with ``due_at <= now()``, earliest due first.

        Read-only: Hangfire's ``GetFirstByLowestScoreFromSet`` with a count. Served by an index
        on due time, never a scan.
        """

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        """Take the per-job lock on one due job: ``SCHEDULED`` -> ``CLAIMED``, leaving the due set.

        Each claim counts one attempt (``attempts + 1``) and records ``lock.token`` as the claim's
        token and ``now() + lease`` as its lease. Returns ``None`` when the job is not (or no
        longer) scheduled and due, when another claimer got it first, or when ``lock`` is no
        longer current.
        """

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        """Claim up to ``limit`` due jobs, earliest first, in one statement or script.

        The set-based fast path: the same guarantees as ``claim`` for every job returned.
        """

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        """Record that claimed jobs were handed to the worker system: ``CLAIMED`` -> ``ENQUEUED``.

        Returns the ids that were still held under each claim's token. A claim whose lease ran
        out but that was not yet recovered still succeeds; a missing id means the claim expired
        *and was recovered*, so the job may be sent again by another claimer.
        """

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        """Give claimed jobs back: ``CLAIMED`` -> ``SCHEDULED``, due again at their old due time.

        Keeps ``error`` as the job's ``last_error`` (``None`` keeps the previous one). Returns the
        ids that were still held under each claim's token.
        """

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        """End claimed jobs that must not be sent (their ``expires`` passed): -> ``EXPIRED``."""

    def back_off(self, claims: Sequence[ClaimedJob], error: str, delay: float) -> list[str]:
        """Give back claimed jobs that could not be sent, for a later attempt: ``CLAIMED`` ->
        ``SCHEDULED``, due ``delay`` (> 0) seconds after ``now()``, ``error`` as their
        ``last_error``. So a job its dispatcher refuses is not claimed first by every pass.
        Returns the ids that were still held under each claim's token."""

    def fail(self, claims: Sequence[ClaimedJob], error: str) -> list[str]:
        """Set aside claimed jobs that could not be sent after every attempt allowed: ``CLAIMED``
        -> ``FAILED`` with ``error`` as their ``last_error`` (``reschedule`` brings one back).
        Returns the ids that were still held under each claim's token."""

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        """Make jobs whose claim lease ran out ``SCHEDULED`` again (``last_error`` says why).

        The scheduler calls this under its lock at the start of every pass. Returns how many.
        """

    def next_due_at(self) -> float | None:
        """The earliest ``due_at`` of a ``SCHEDULED`` job, or ``None`` when there is none."""

    def next_work_at(self) -> float | None:
        """When a release pass next has work, in one round trip: the earlier of the earliest
        ``due_at`` of a ``SCHEDULED`` job and the earliest lease end of a ``CLAIMED`` job (just
        after it, ``recover_expired_claims`` finds that claim); ``None`` when there is neither.

        The scheduler's peek before a pass: when this is in the future, the pass takes no lock
        and costs nothing more. Served by the due index and the claim-lease index, never a scan.
        """


@runtime_checkable
class LockStore(Protocol):
    """The distributed lock: one holder at a time per name, each holding a lease on the storage
    clock and a fencing token greater than any before it."""

    def acquire_lock(self, name: str, owner: str, lease: float) -> LockLease | None:
        """Take lock ``name`` for ``lease`` seconds if it is free or its lease ran out.

        Every successful acquisition gets a fencing token greater than any before it. Returns
        ``None`` while any unexpired lease exists, the caller's own included: the lock is not
        re-entrant, so one owner cannot run two passes at once.
        """

    def renew_lock(self, lock: LockLease, lease: float) -> LockLease | None:
        """Extend a held lock; ``None`` if ``lock`` is no longer the current holder."""

    def release_lock(self, lock: LockLease) -> bool:
        """Free the lock if ``lock`` still holds it; the fencing counter is kept.

        ``False`` when the lease was no longer current (taken over, or already run out).
        """

    def lock_holder(self, name: str) -> LockLease | None:
        """The current unexpired holder of ``name``, if any (for status output)."""


@runtime_checkable
class RecurringStore(Protocol):
    """Recurring jobs: their definitions, and firing them with a compare-and-set on version."""

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        """Create or replace a recurring job; returns ``True`` if it was created.

        ``create`` raises ``RecordExistsError`` if the id exists, ``update`` raises
        ``RecordNotFoundError`` if it does not (both are ``KeyError``); neither writes anything
        then. An update replaces task, payload, schedule, enabled
        and next_run_at, keeps last_run_at, history and created_at, and bumps the version.
        """

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        """One recurring job by id."""

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        """Recurring jobs ordered by id, paged by offset."""

    def remove_recurring(self, recurring_id: str) -> bool:
        """Delete a recurring job (its firings already made stay); ``False`` if missing."""

    def set_recurring_enabled(
        self, recurring_id: str, enabled: bool, next_run_at: float | None
    ) -> bool:
        """Pause (``enabled=False``) or resume a recurring job, setting its next run too.

        Bumps the version; ``False`` if missing.
        """

    def fetch_due_recurring(self, limit: int) -> list[RecurringRecord]:
        """Up to ``limit`` enabled recurring jobs with ``next_run_at <= now()``, earliest first.

        Read-only, served by an index on next_run_at.
        """

    def next_recurring_at(self) -> float | None:
        """The earliest ``next_run_at`` of an enabled recurring job, due or not (``None``: none
        has a next run), in one round trip: when an idle recurring loop next has work."""

    def fire_recurring(
        self, recurring_id: str, version: int, lock: LockLease, firing: Firing
    ) -> list[bool] | None:
        """Fire one recurring job: atomically add ``firing.jobs`` (idempotent on job id, as in
        ``add_jobs``) and set next_run_at, last_run_at and history, bumping the version.

        Acts only if the stored version is still ``version`` (the per-recurring-job lock: a
        compare-and-set) and ``lock`` is current; otherwise changes nothing and returns
        ``None``. Returns, per job, whether it was created (``False``: that firing existed).
        A sharded store also needs each job's id in the firing form of this recurring job
        (``<recurring id>@<UTC time>Z``, see sharding.py), which puts it in the same shard.
        """

    def trigger_recurring(
        self, recurring_id: str, version: int, firing: ManualFiring
    ) -> bool | None:
        """Record a manual trigger: atomically add ``firing.job`` (idempotent on id) and set
        last_run_at and history, bumping the version; next_run_at and enabled stay as they are.

        Acts only if the stored version is still ``version``, else changes nothing and returns
        ``None`` (a missing recurring job is stale too). No lock: it fires no tick, and the
        version orders it with the scheduler's firings. Returns whether the job was created.
        A sharded store needs the job's id in this recurring job's trigger form
        (``<recurring id>@trigger-...``).
        """

    def count_recurring(self) -> int:
        """How many recurring jobs are stored."""


@runtime_checkable
class InstanceStore(Protocol):
    """Liveness: every scheduler process keeps a record of itself, stamped by the storage clock
    on each heartbeat, so anyone can tell which schedulers are alive and what each is doing."""

    def register_instance(self, instance: InstanceRecord) -> None:
        """Create or replace the record of ``instance.id``; storage stamps ``heartbeat_at``
        with its own ``now()`` (the value given is ignored)."""

    def heartbeat_instance(self, instance_id: str, details: str) -> bool:
        """Stamp ``heartbeat_at = now()`` and replace ``details``; ``False`` (nothing written)
        when the record is gone (removed as dead while this process stalled: register again)."""

    def list_instances(self) -> list[InstanceRecord]:
        """Every stored record, ordered by id."""

    def remove_instances_older_than(self, cutoff: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` records whose ``heartbeat_at`` is before ``cutoff``; how many."""

    def remove_instance(self, instance_id: str) -> bool:
        """Delete one record (a graceful stop); ``False`` if it was not there."""


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


@runtime_checkable
class Storage(
    StorageAdmin,
    JobStore,
    ReleaseStore,
    LockStore,
    RecurringStore,
    InstanceStore,
    RetentionStore,
    BrowseStore,
    Protocol,
):
    """Durable store of scheduled jobs and distributed locks: every family above, in one object.

    Every method is safe to call from many threads and many processes at once. Methods that take
    a ``lock`` refuse to act (return nothing, change nothing) unless that lease is still the
    current holder of its lock on the storage clock: that is the fence that stops a stalled
    scheduler from acting on ownership it lost.
    """
