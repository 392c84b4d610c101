"""The execution-outcomes family (``OutcomeStore``): what Celery workers did with the jobs
released from storage, written in batches by the workers' plugin and read by people."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from storage_adapters.records import OutcomeEvent, OutcomeQuery, OutcomeState

__all__ = ["OutcomeStore"]


@runtime_checkable
class OutcomeStore(Protocol):
    """Each released job's state changes on a worker (received, started, then succeeded,
    failed, retried or revoked), kept with the job: retention deletes a job's outcomes with it
    (``purge_finished``), and ``drop`` deletes them all."""

    def record_outcomes(self, events: Sequence[OutcomeEvent]) -> int:
        """Store a batch (at most ``MAX_OUTCOME_BATCH``, 1000) in one round trip where the
        backend allows; returns how many were new. An event equal on ``(job_id, state, at)`` to
        one stored is skipped, so a batch sent twice (a retried write) stores nothing twice.
        A bad event refuses the whole batch (``InvalidRecordError``), nothing written. The job
        need not exist: outcomes are written by workers, who never read the job."""

    def outcome_history(self, job_id: str) -> list[OutcomeEvent]:
        """Every stored event of one job, oldest first (ties in the order states happen):
        its timeline on the workers. ``[]`` for a job with none."""

    def latest_outcomes(self, job_ids: Sequence[str]) -> dict[str, OutcomeEvent]:
        """The last event (as ``outcome_history`` orders them) of each of ``job_ids`` (at most
        1000) that has one, by id: what became of each, in one round trip where the backend
        allows (a recurring job's recent firings, a page of jobs)."""

    def outcomes_page(self, query: OutcomeQuery, limit: int) -> list[OutcomeEvent]:
        """Up to ``limit`` (1-1000) final events (succeeded, failed, retried, revoked) matching
        ``query``, newest first by ``(at, job_id)`` descending, starting strictly before
        ``query.before``: keyset pagination served by an index, never an offset."""

    def outcome_counts(self) -> dict[str, dict[OutcomeState, int]]:
        """How many final events are stored, per task and final state (the tasks with at least
        one; every final state present per task, zeros included). Kept as counters updated with
        every write and purge, so reading them costs the number of tasks, not of events."""
