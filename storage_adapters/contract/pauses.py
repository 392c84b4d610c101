"""The pause family (``PauseStore``): stop releasing the jobs of a queue or a task without
touching them, in storage, so every scheduler process and shard obeys the same pause."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from storage_adapters.records import PauseKind, PauseRecord

__all__ = ["PauseStore"]


@runtime_checkable
class PauseStore(Protocol):
    """Pauses of queues and task names, and the ``HELD`` jobs they keep back.

    While a pause is in force, every job of its queue (``NewJob.queue``) or task that is, or
    would become, ``SCHEDULED`` is ``HELD`` instead: when it is accepted, fired by a recurring
    job, given back (``unclaim``, ``back_off``, a settlement), recovered from an expired claim or
    rescheduled. A held job keeps its due time; it is never claimed or released, and
    ``fetch_due_ids``, ``next_due_at`` and ``next_work_at`` do not see it, so a paused queue with
    a million due jobs costs the release of the others nothing. ``cancel`` and ``reschedule``
    (which moves its due time and keeps it held) work on it as on a scheduled job. A job claimed
    before the pause is still sent. The rule is kept atomically in storage: a job accepted while
    a pause is being made is either held by it or was already claimable before it.
    """

    def pause(self, kind: PauseKind, name: str, note: str, paused_by: str) -> int:
        """Put a pause of queue or task ``name`` in force (pausing it again replaces its note and
        ``paused_by``, keeping ``paused_at``). Every ``SCHEDULED`` job of it becomes ``HELD``;
        returns how many. The checks of ``checks/pauses.py`` refuse bad input first."""

    def resume(self, kind: PauseKind, name: str) -> int:
        """End the pause (``False``-free: ending one not in force does nothing and returns 0).
        Every ``HELD`` job that no other pause holds becomes ``SCHEDULED`` at its due time, so
        the due ones go out in due order; returns how many."""

    def list_pauses(self) -> list[PauseRecord]:
        """Every pause in force, ordered by ``(kind, name)``."""
