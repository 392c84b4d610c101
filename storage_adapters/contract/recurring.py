"""The recurring-jobs family (``RecurringStore``): definitions, and firing them with a
compare-and-set on their version so two schedulers never fire one tick twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage_adapters import records

__all__ = ["RecurringStore"]


@runtime_checkable
class RecurringStore(Protocol):
    """Recurring jobs: their definitions, and firing them with a compare-and-set on version."""

    def save_recurring(self, recurring: records.NewRecurring, mode: records.SaveMode) -> bool:
        """Create or replace a recurring job; returns ``True`` if it was created.

        ``create`` raises ``RecordExistsError`` if the id exists, ``update`` raises
        ``RecordNotFoundError`` if it does not (both are ``KeyError``); neither writes anything
        then. An update replaces task, payload, schedule, enabled
        and next_run_at, keeps last_run_at, history and created_at, and bumps the version; one
        that enables it clears its pause's note, who and when, one that keeps it paused keeps
        them.
        """

    def save_recurring_many(
        self, recurrings: Sequence[records.NewRecurring], mode: records.SaveMode
    ) -> list[bool]:
        """``save_recurring`` for a chunk, in one storage step, all or nothing: per item, whether
        it was created. ``create`` raises ``RecordExistsError`` if any id exists, ``update``
        ``RecordNotFoundError`` if any does not (naming them), and nothing is written then."""

    def get_recurring(self, recurring_id: str) -> records.RecurringRecord | None:
        """One recurring job by id."""

    def existing_recurring_ids(self, recurring_ids: Sequence[str]) -> set[str]:
        """Which of ``recurring_ids`` name a stored recurring job, in one round trip (at most
        ``MAX_LOOKUP_IDS``); read-only. An id that cannot name one is simply not in the answer."""

    def list_recurring(self, limit: int, offset: int = 0) -> list[records.RecurringRecord]:
        """Recurring jobs ordered by id, paged by offset."""

    def remove_recurring(self, recurring_id: str) -> bool:
        """Delete a recurring job (its firings already made stay); ``False`` if missing."""

    def set_recurring_enabled(
        self,
        recurring_id: str,
        enabled: bool,
        next_run_at: float | None,
        note: str = "",
        paused_by: str = "",
        version: int | None = None,
    ) -> bool:
        """Pause (``enabled=False``) or resume a recurring job, setting its next run too.

        A pause keeps ``note`` (why) and ``paused_by`` (who) as the record's ``pause_note`` and
        ``paused_by``, and since when as ``paused_at`` (storage clock; pausing a paused job again
        replaces the note and who, and keeps the time); a resume clears all three. A bad note or
        ``paused_by`` (``check_pause_note``) raises ``InvalidArgumentError`` and writes nothing.
        Bumps the version; ``False`` if missing, or when ``version`` is given and the job's
        version is another (it changed since it was read: a compare-and-set, as the firing's).
        """

    def fetch_due_recurring(
        self, limit: int, until: float | None = None, offset: int = 0
    ) -> list[records.RecurringRecord]:
        """Up to ``limit`` enabled recurring jobs with ``next_run_at <= now()``, earliest first
        (ties by id); with ``until`` (epoch seconds, storage clock), those with ``next_run_at <=
        until`` instead, due or not: a scheduler reads a coming tick's jobs to plan them before
        it, ``offset`` skipping the first ones, a page at a time (a job changed between pages
        may be read twice or not at all).

        Read-only, served by an index on next_run_at. A bad ``until`` (not a finite number) or
        ``offset`` (not a count) raises ``InvalidArgumentError``.
        """

    def next_recurring_at(self) -> float | None:
        """The earliest ``next_run_at`` of an enabled recurring job, due or not (``None``: none
        has a next run), in one round trip: when an idle recurring loop next has work."""

    def fire_recurring_many(
        self, lock: records.LockLease, planned: Sequence[records.PlannedFiring]
    ) -> list[list[bool] | None]:
        """Fire a chunk of recurring jobs in one storage step (one script, one transaction):
        for each, atomically add its ``firing.jobs`` (idempotent on job id, as in ``add_jobs``)
        and set next_run_at, last_run_at and history, bumping the version.

        Each acts only if its stored version is still ``version`` (the per-recurring-job lock:
        a compare-and-set), and none acts unless ``lock`` is current. Returns, per item in
        order, ``None`` when it changed nothing (a stale version or lease, a missing recurring
        job), else per job whether it was created (``False``: that firing existed). Every item
        is checked before anything is written. A sharded store also needs each job's id in the
        firing form of its recurring job (``<recurring id>@<UTC time>Z``, see sharding.py),
        which puts it in the same shard.
        """

    def trigger_recurring(
        self, recurring_id: str, version: int, firing: records.ManualFiring
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
