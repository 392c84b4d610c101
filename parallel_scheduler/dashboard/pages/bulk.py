"""Bulk actions on the jobs ticked on the Jobs page: cancel them, make them due now, or move
each by an offset from its own due time. A POST like every action: the CSRF token (checked in
``app``), a ticked confirmation box, one audit line naming every job acted on. (Cancelling
every job matching the filters, ticked or not, is ``bulk_cancel`` in ``pages/jobs``.)"""

from __future__ import annotations

from typing import Any

from flask import Flask, flash, redirect, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import filter_args, require_confirmation
from parallel_scheduler.dashboard.inputs import BadInput, parse_job_id, parse_seconds, parse_text
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError

__all__ = ["SELECTED_LIMIT", "register"]

#: Jobs one request may name (the largest page offered is 200 rows).
SELECTED_LIMIT = 500
ACTIONS = ("cancel", "run_now", "shift")
_DONE = {"cancel": "cancelled", "run_now": "made due now", "shift": "moved"}


def _selected() -> list[str]:
    raw = request.form.getlist("ids")
    if not raw:
        raise BadInput("no job was selected: tick the jobs to act on")
    if len(raw) > SELECTED_LIMIT:
        raise BadInput(f"{len(raw)} jobs selected; at most {SELECTED_LIMIT} at once")
    ids = [parse_job_id({"ids": value}, "ids") for value in raw]
    return list(dict.fromkeys(ids))


def _shift(job_id: str, offset: float) -> bool:
    """Move one job by ``offset`` seconds from its own due time (``False`` when it is gone)."""
    client = dashboard().client
    record = call_storage(lambda: client.storage.get_job(job_id), give_up_after=client.retry_for)
    if record is None:
        return False
    try:
        return client.reschedule(job_id, eta=record.due_at + offset)
    except InvalidJobError:  # moved outside the valid range: that job stays where it is
        return False


def bulk_selected() -> Response:
    form = request.form
    action = parse_text(form, "action", 20)
    if action not in ACTIONS:
        raise BadInput(f"action {action!r} is not one of {', '.join(ACTIONS)}")
    ids = _selected()
    offset = parse_seconds(form, "offset")
    if action == "shift" and offset is None:
        raise BadInput("offset: give the seconds to move each job by (negative: earlier)")
    require_confirmation(form)
    client = dashboard().client
    done: list[str] = []
    if action == "run_now":
        now = call_storage(client.storage.now, give_up_after=client.retry_for)
    for job_id in ids:
        if action == "cancel":
            ok = client.cancel(job_id)
        elif action == "run_now":
            ok = client.reschedule(job_id, eta=now)
        else:
            ok = _shift(job_id, offset or 0.0)
        if ok:
            done.append(job_id)
    detail = f"selected={len(ids)}" + (f" offset={offset}" if action == "shift" else "")
    audit(f"bulk_{action}", done, detail)
    flash(f"{len(done)} of {len(ids)} selected jobs {_DONE[action]}")
    back: dict[str, Any] = dict(filter_args(form))
    return redirect(url_for("jobs", **back), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/jobs/bulk", "bulk_selected", bulk_selected, methods=["POST"])
