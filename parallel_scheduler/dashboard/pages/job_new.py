"""The "Schedule a job" form: task, arguments and keyword arguments as JSON, queue, a countdown or
a due time in the viewer's zone, an optional id, and a unique key with what a held key does
(keep or replace). It schedules through ``Client.schedule`` (``dashboard.scheduling``, as the API
and the command line do), so a refused form is shown again with the client's own words and
nothing is written; the answer says whether the job was created or the key's holder kept or
replaced, with a link to the job."""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request

from parallel_scheduler.dashboard.context import viewer_zone
from parallel_scheduler.dashboard.forms import parse_json_field, require_confirmation
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    parse_instant,
    parse_seconds,
    parse_task,
    parse_text,
)
from parallel_scheduler.dashboard.scheduling import schedule_job
from parallel_scheduler.errors import InvalidJobError
from storage_adapters.checks.unique import MAX_UNIQUE_KEY_LENGTH, UNIQUE_CONFLICTS

__all__ = ["register"]


def _unique_key(form: Any) -> str | None:
    """The key as typed (not stripped: the client refuses surrounding spaces in its own words);
    an empty field schedules a plain job."""
    raw = form.get("unique_key")
    return raw if isinstance(raw, str) and raw != "" else None


def _schedule() -> dict[str, Any]:
    form = request.form
    require_confirmation(form)
    task = parse_task(form)
    if task is None:
        raise BadInput("task: the task name is required")
    queue = parse_text(form, "queue", 255)
    return schedule_job(
        task,
        parse_json_field(form, "args", list),
        parse_json_field(form, "kwargs", dict),
        eta=parse_instant(form, "eta", viewer_zone()),
        countdown=parse_seconds(form, "countdown"),
        job_id=parse_text(form, "id", 1000),
        unique_key=_unique_key(form),
        on_conflict=form.get("on_conflict") or "keep",
        options={} if queue is None else {"queue": queue},
        action="schedule",
    )


def job_new() -> Any:
    if request.method == "GET":
        return _page(None, None, None)
    try:
        result = _schedule()
    except (InvalidJobError, BadInput) as exc:
        return _page(request.form, str(exc), None), 400
    return _page(None, None, result)


def _page(form: Any, error: str | None, result: dict[str, Any] | None) -> str:
    return render_template(
        "job_new.html",
        form=form,
        error=error,
        result=result,
        conflicts=UNIQUE_CONFLICTS,
        max_key=MAX_UNIQUE_KEY_LENGTH,
    )


def register(app: Flask) -> None:
    app.add_url_rule("/jobs/new", "job_new", job_new, methods=["GET", "POST"])
