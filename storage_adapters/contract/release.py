"""The families a scheduler's release pass uses: the hand-off itself (``ReleaseStore``) and the
fenced distributed lock (``LockStore``) whose lease every step of it checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import (
    ClaimedJob,
    LockLease,
)

__all__ = ["LockStore", "ReleaseStore"]


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
