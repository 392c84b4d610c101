"""The rate-limit family (``RateLimitStore``): at most so many releases of a queue's or a task's
jobs per period, one budget in storage that every scheduler process and shard spends from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import ClaimedJob, PauseKind, RateLimitRecord, Reservation

__all__ = ["RateLimitStore"]


@runtime_checkable
class RateLimitStore(Protocol):
    """Rate limits of queues and task names, kept as a generic cell rate algorithm (GCRA): a
    limit of ``count`` per ``period`` seconds releases one job every ``period / count`` seconds,
    up to ``burst`` of them at once after a quiet spell, as a token bucket of ``burst`` tokens
    refilled at that pace would. Its only state is the instant the next job may go, so a
    reservation is one atomic read-modify-write on the storage clock: two schedulers cannot
    spend one slot, and the releases of any span of time never exceed ``burst`` plus the pace
    times the span.

    The release path reserves a slot for each claimed job of a limited queue or task, sends the
    jobs whose slot has come and gives the others back (``defer``) due at their slots, so they
    wait in due order without being read again before then; claimed again at its slot, such a
    job is sent on the slot it holds. A slot reserved for a job that is then not sent is lost
    (the budget is under-spent, never over-spent).
    """

    def set_rate_limit(
        self, kind: PauseKind, name: str, count: int, period: float, burst: int, set_by: str
    ) -> None:
        """Put a limit on queue or task ``name`` in force, or replace its numbers and
        ``set_by`` (keeping ``set_at`` and the slots already reserved). The checks of
        ``checks/rate_limits.py`` refuse bad input first."""

    def remove_rate_limit(self, kind: PauseKind, name: str) -> bool:
        """End the limit; ``False`` when none was in force. Jobs already given back due at a
        reserved slot keep that due time until ``requeue_waiting``."""

    def requeue_waiting(self, kind: PauseKind, name: str) -> int:
        """Make the jobs of queue or task ``name`` that wait for a slot (given back by ``defer``
        due at a slot still to come, Scheduled or Held) due now again, in the order of their
        slots, without the slot and its note, and forget the limit's reserved slots (its
        ``tat``, when one is in force), so they reserve afresh under the limit now in force, or
        go at once when none is; returns how many moved. Run after a limit is set or removed."""

    def list_rate_limits(self) -> list[RateLimitRecord]:
        """Every limit in force, ordered by ``(kind, name)``, each with its ``free_at``."""

    def reserve_release_slots(self, kind: PauseKind, name: str, count: int) -> Reservation | None:
        """Reserve the next ``count`` (>= 1) release slots of the limit, in order, atomically:
        for each, ``slot = max(now, tat - (burst - 1) * interval)`` then
        ``tat = max(tat, slot) + interval`` (``interval = period / count``; ``tat`` starts at
        ``now``). ``None`` when no such limit is in force."""

    def after_deferring(self, deferred: int) -> None:
        """A release pass gave ``deferred`` jobs back for their limits (``defer``, or a chunk
        settlement's): storage may tidy up after many. PostgreSQL, at ``VACUUM_AFTER`` or more,
        vacuums the jobs table, so the due index sheds their old entries, which every claim
        would walk first until autovacuum ran. Best effort: never raises."""

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> list[str]:
        """Give back claimed jobs that must wait for their rate limit: ``CLAIMED`` ->
        ``SCHEDULED`` (``HELD`` where a pause holds it), due at ``due_ats[i]``, which it keeps as
        its ``slot_at`` (claims return it: a job claimed while its due time is still that slot
        holds the slot and is sent without reserving another), ``note`` as the ``last_error``,
        and the claim's attempt uncounted (``attempts - 1``: waiting is no failed send). Returns
        the ids that were still held under each claim's token."""
