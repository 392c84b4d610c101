"""Scheduling one job from the dashboard (its "Schedule a job" form and ``POST /api/v1/jobs``):
both go through ``Client.schedule``, as the command line's ``schedule`` does, so a bad task,
payload, time, unique key or ``on_conflict`` is refused in the client's words and nothing is
written; both answer with ``schedule_view``, the command line's ``--json`` shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.views import job_view, schedule_view

__all__ = ["schedule_job"]


def schedule_job(
    task: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    eta: datetime | float | None,
    countdown: float | None,
    job_id: str | None,
    unique_key: Any,
    on_conflict: Any,
    options: Mapping[str, Any],
    action: str,
) -> dict[str, Any]:
    """Schedule through ``Client.schedule`` and leave one audit line (``action``); the answer is
    ``schedule_view`` (``replaced`` and ``outcome`` for a unique job) with the stored due time
    when this call created nothing (the holder's or the existing id's, as the command line
    prints it). ``unique_key`` and ``on_conflict`` are passed as given: the client checks them."""
    client = dashboard().client
    result = client.schedule(
        task,
        args,
        dict(kwargs),
        eta=eta,
        countdown=countdown,
        job_id=job_id,
        unique_key=unique_key,
        on_conflict="keep" if on_conflict is None else on_conflict,
        **options,
    )
    due = result.due_at.isoformat()
    if not result.created:  # what is stored, not the due time this call asked for
        record = call_storage(
            lambda: client.storage.get_job(result.job_id), give_up_after=client.retry_for
        )
        due = due if record is None else str(job_view(record)["due_at"])
    view = schedule_view(
        result.job_id, result.created, due, None if unique_key is None else result.replaced
    )
    outcome = view.get("outcome", "created" if result.created else "kept")
    key = "" if unique_key is None else f" unique_key={unique_key!r}"
    audit(action, [result.job_id], f"task={task}{key} outcome={outcome}")
    return view
