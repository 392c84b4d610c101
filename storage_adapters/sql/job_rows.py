"""Jobs in the SQL adapters: rows read back as the contract's records, apart from ``SQLStorage``
so that module stays about plumbing and the job life cycle (``sql/recurring_rows.py`` does the
same for recurring jobs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Row

from storage_adapters.checks.values import stored_seconds
from storage_adapters.records import ClaimedJob, JobRecord, JobState

__all__ = ["claimed_job", "job_record"]


def job_record(row: Row[Any]) -> JobRecord:
    """A stored job's row; its instants may be outside the valid range (``stored_seconds``)."""
    return JobRecord(
        id=row.id,
        task=row.task,
        payload=row.payload,
        due_at=stored_seconds(row.due_at),
        state=JobState(row.state),
        attempts=int(row.attempts),
        created_at=stored_seconds(row.created_at),
        updated_at=stored_seconds(row.updated_at),
        last_error=row.last_error,
        queue=row.queue,
        unique_key=row.unique_key,
    )


def claimed_job(row: Sequence[Any], token: int) -> ClaimedJob:
    """A row the claim statements returned, held under the fencing ``token``: a ``Row`` or the
    driver's plain tuple (``SQLPlumbing._driver_rows``), read by position, in the order of
    ``Statements.claim_columns``."""
    job_id, task, payload, due_at, attempts, envelope, queue, slot_at = row
    return ClaimedJob(
        id=job_id,
        task=task,
        payload=payload,
        due_at=float(due_at),
        attempts=int(attempts),
        token=token,
        envelope=envelope,
        queue=queue,
        slot_at=None if slot_at is None else float(slot_at),
    )
