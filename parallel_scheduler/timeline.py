"""A released job's timeline, and its execution outcomes, as people see them: one home for the
shapes ``parallel-scheduler show`` (text and ``--json``), the dashboard's job page, its Outcomes
page and a recurring job's recent firings share.

The timeline joins what storage knows of the job (created; claimed, sent, cancelled, expired, set
aside or held by a pause, from its record) with what the workers recorded (``OutcomeStore``:
received, started, then succeeded, failed, retried or revoked, with who and when), oldest first.
Times are ISO 8601 UTC text, as in every other view; a job with no outcomes yet has the storage
part alone.
"""

from __future__ import annotations

from typing import Any

from parallel_scheduler.ranges import instant
from storage_adapters import JobRecord, JobState, OutcomeEvent, OutcomeStore

__all__ = ["job_timeline", "outcome_view", "read_outcomes", "timeline_line"]

#: What the job record's last state change is called on the timeline.
_RECORDED = {
    JobState.CLAIMED: "claimed",
    JobState.ENQUEUED: "sent",
    JobState.CANCELLED: "cancelled",
    JobState.EXPIRED: "expired",
    JobState.FAILED: "set aside",
    JobState.HELD: "held",
}


def outcome_view(event: OutcomeEvent) -> dict[str, Any]:
    """One recorded outcome as a JSON-ready dict."""
    return {
        "job_id": event.job_id,
        "task": event.task,
        "state": event.state.value,
        "at": instant("at", event.at, []),
        "worker": event.worker,
        "runtime": event.runtime,
        "error": event.error,
        "retry_id": event.retry_id,
    }


def read_outcomes(store: object, job_id: str) -> list[OutcomeEvent]:
    """``job_id``'s recorded outcomes, or none from a store without the outcomes family."""
    if not isinstance(store, OutcomeStore):
        return []
    return store.outcome_history(job_id)


def job_timeline(record: JobRecord | None, events: list[OutcomeEvent]) -> list[dict[str, Any]]:
    """Every state change of a job in the order it happened: ``{"at", "state", "worker",
    "runtime", "error", "retry_id"}`` each (``None`` where it does not apply).

    Storage's part comes first (created, then the record's last change), the workers' after it,
    in their own order: a job is only ever received once sent, though a worker may stamp the
    receipt a moment before storage stamps the send (the mark follows the publish, and the two
    are different clocks)."""
    timeline: list[dict[str, Any]] = []

    def add(at: float, state: str, **details: Any) -> None:
        entry = {"at": instant("at", at, []), "state": state, "worker": None, "runtime": None}
        timeline.append({**entry, "error": None, "retry_id": None, **details})

    if record is not None:
        add(record.created_at, "created")
        recorded = _RECORDED.get(record.state)
        if recorded is not None:
            error = record.last_error if record.state is JobState.FAILED else None
            add(record.updated_at, recorded, error=error)
    for event in events:
        view = outcome_view(event)
        details = {k: v for k, v in view.items() if k not in ("job_id", "task", "state", "at")}
        add(event.at, event.state.value, **details)
    return timeline


def timeline_line(entry: dict[str, Any]) -> str:
    """One timeline entry as text, after its time: the state, then who, how long, why."""
    parts = [str(entry["state"])]
    if entry.get("worker"):
        parts.append(f"on {entry['worker']}")
    if entry.get("runtime") is not None:
        parts.append(f"in {entry['runtime']:.3f} s")
    if entry.get("retry_id"):
        parts.append(f"stored as {entry['retry_id']}")
    if entry.get("error"):
        parts.append(f"({entry['error']})")
    return " ".join(parts)
