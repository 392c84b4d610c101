"""The Recurring page: every recurring job with its schedule and recent firings; pause, resume,
trigger now, remove, and the schedule edit form, whose validation is the API's own
(``client.recurring.save(..., mode="update")``): its ``InvalidJobError`` is shown in the form."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from flask import Flask, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import require_confirmation
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    parse_int,
    parse_job_id,
    parse_seconds,
    parse_text,
)
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jobs import utc_datetime
from parallel_scheduler.recurring.jobs import RecurringJob
from parallel_scheduler.recurring.triggers import MisfirePolicy
from storage_adapters import OutcomeStore

__all__ = ["register"]

PAGE_SIZE = 100
RECENT_FIRINGS = 5
MISFIRE_POLICIES = ("skip", "run_once", "run_all")


def recurring() -> Any:
    offset = parse_int(request.args, "offset", 0, 0, 10_000_000)
    client = dashboard().client
    rows = client.recurring.list(limit=PAGE_SIZE + 1, offset=offset)
    return render_template(
        "recurring.html",
        rows=rows[:PAGE_SIZE],
        recent=RECENT_FIRINGS,
        outcomes=_firing_outcomes(rows[:PAGE_SIZE]),
        next_url=url_for("recurring", offset=offset + PAGE_SIZE) if len(rows) > PAGE_SIZE else None,
    )


def _firing_outcomes(rows: list[RecurringJob]) -> dict[str, str]:
    """The latest recorded outcome of each recent firing shown (one storage read for the page);
    none from a store that keeps no outcomes."""
    client = dashboard().client
    store = client.storage
    ids = [
        firing.job_id
        for row in rows
        for firing in row.recent_firings()[:RECENT_FIRINGS]
        if firing.job_id is not None
    ]
    if not ids or not isinstance(store, OutcomeStore):
        return {}
    latest = call_storage(lambda: store.latest_outcomes(ids), give_up_after=client.retry_for)
    return {job_id: event.state.value for job_id, event in latest.items()}


def _existing(recurring_id: str) -> RecurringJob:
    found = dashboard().client.recurring.get(recurring_id)
    if found is None:
        raise BadInput(f"recurring job {recurring_id!r} does not exist")
    return found


def recurring_action() -> Response:
    form = request.form
    recurring_id = parse_job_id(form)
    action = parse_text(form, "action", 20)
    if action not in ("pause", "resume", "trigger", "remove"):
        raise BadInput(f"action {action!r} is not one of pause, resume, trigger, remove")
    require_confirmation(form)
    jobs = dashboard().client.recurring
    detail = ""
    if action == "pause":
        done = jobs.pause(recurring_id)
    elif action == "resume":
        done = jobs.resume(recurring_id)
    elif action == "trigger":
        detail, done = f"firing={jobs.trigger(recurring_id)}", True
    else:
        done = jobs.remove(recurring_id)
    audit(f"recurring_{action}", [recurring_id], f"{detail} done={done}".strip())
    flash(f"recurring job {recurring_id}: {action} {'done' if done else 'changed nothing'}")
    return redirect(url_for("recurring"), 303)


def _save(found: RecurringJob) -> RecurringJob:
    """The edited schedule, saved through the API (its validation, its error messages)."""
    form = request.form
    cron = parse_text(form, "cron", 200) or ""
    every = parse_seconds(form, "every")
    policy = parse_text(form, "misfire_policy", 20) or "run_once"
    if policy not in MISFIRE_POLICIES:
        raise InvalidJobError(f"misfire policy {policy!r} is not one of {MISFIRE_POLICIES}")
    grace = parse_seconds(form, "misfire_grace")
    schedule = found.schedule
    start = None if schedule.start_at is None else utc_datetime(schedule.start_at)
    end: datetime | None = None if schedule.end_at is None else utc_datetime(schedule.end_at)
    return dashboard().client.recurring.save(
        found.id,
        found.task,
        cron,
        every=every,
        args=found.args,
        kwargs=found.kwargs,
        timezone=parse_text(form, "timezone", 100) or "UTC",
        start=start,
        end=end,
        misfire_policy=cast(MisfirePolicy, policy),
        misfire_cap=parse_int(form, "misfire_cap", schedule.misfire_cap, 1, 1_000_000),
        misfire_grace=schedule.misfire_grace if grace is None else grace,
        enabled=found.enabled,
        mode="update",
        **found.options,
    )


def recurring_edit() -> Any:
    values = request.form if request.method == "POST" else request.args
    recurring_id = parse_job_id(values)
    found = _existing(recurring_id)
    if request.method == "GET":
        return render_template(
            "recurring_edit.html", job=found, form=None, error=None, policies=MISFIRE_POLICIES
        )
    try:
        require_confirmation(request.form)
        saved = _save(found)
    except (InvalidJobError, BadInput) as exc:
        return render_template(
            "recurring_edit.html",
            job=found,
            form=request.form,
            error=str(exc),
            policies=MISFIRE_POLICIES,
        ), 400
    audit("recurring_edit", [recurring_id], saved.schedule.describe())
    flash(f"recurring job {recurring_id} saved: {saved.schedule.describe()}")
    return redirect(url_for("recurring"), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/recurring", "recurring", recurring)
    app.add_url_rule("/recurring/action", "recurring_action", recurring_action, methods=["POST"])
    app.add_url_rule("/recurring/edit", "recurring_edit", recurring_edit, methods=["GET", "POST"])
