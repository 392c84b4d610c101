"""Creating a recurring job from the dashboard: task, arguments and keyword arguments as JSON,
queue, a cron expression or an interval, its time zone and misfire policy. "Preview" shows the
schedule in words and its next five runs in the chosen zone without saving; "Create" saves it
through ``client.recurring.save(..., mode="create")``, whose validation and messages are the
API's own: a refused form is shown again with the reason."""

from __future__ import annotations

import time
from typing import Any, cast

from flask import Flask, flash, redirect, render_template, request, url_for

from parallel_scheduler.calendars import calendar_names
from parallel_scheduler.dashboard import schedules
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import parse_json_field, require_confirmation
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    parse_job_id,
    parse_seconds,
    parse_task,
    parse_text,
    parse_zone,
)
from parallel_scheduler.dashboard.pages.recurring import MISFIRE_POLICIES
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.max_runs import max_runs_arg
from parallel_scheduler.recurring.overlap_policy import OVERLAP_POLICIES, seconds_arg
from parallel_scheduler.recurring.triggers import MisfirePolicy, Schedule

__all__ = ["register"]


def _schedule(form: Any) -> Schedule:
    """The schedule the form describes, checked as the scheduler checks it."""
    cron = parse_text(form, "cron", 200) or ""
    every = parse_seconds(form, "every")
    if bool(cron) == (every is not None):
        raise BadInput("give a cron expression or an interval in seconds (one of the two)")
    policy = parse_text(form, "misfire_policy", 20) or "run_once"
    if policy not in MISFIRE_POLICIES:
        raise BadInput(f"misfire policy {policy!r} is not one of {', '.join(MISFIRE_POLICIES)}")
    zone = parse_zone(form, "timezone")
    failures = max_runs_arg(parse_text(form, "pause_after_failures", 40))  # as typed, too
    return Schedule(
        cron,
        every=every,
        timezone=zone.key if zone is not None else "UTC",
        misfire_policy=cast(MisfirePolicy, policy),
        jitter=parse_seconds(form, "jitter") or 0.0,
        catch_up_window=parse_seconds(form, "catch_up_window"),
        # as typed: text that is no whole number is refused by the schedule, in its words
        max_runs=max_runs_arg(parse_text(form, "max_runs", 40)),  # type: ignore[arg-type]
        exclude=calendar_names([parse_text(form, "exclude", 2000) or ""]),
        # as typed, refused by the schedule in its words (overlap_policy.py)
        overlap=parse_text(form, "overlap", 20) or "allow",  # type: ignore[arg-type]
        overlap_timeout=seconds_arg(parse_text(form, "overlap_timeout", 40)),  # type: ignore[arg-type]
        pause_after_failures=failures,  # type: ignore[arg-type]
    )


def _preview(schedule: Schedule) -> dict[str, Any]:
    return {
        "words": schedules.describe(schedule),
        "runs": schedules.next_runs(schedule, time.time()),
        "run_zone": schedule.zone(),
    }


def _create(schedule: Schedule) -> Any:
    form = request.form
    recurring_id = parse_job_id(form)
    task = parse_task(form)
    if task is None:
        raise BadInput("task: the task name is required")
    options: dict[str, Any] = {}
    queue = parse_text(form, "queue", 255)
    if queue is not None:
        options["queue"] = queue
    return dashboard().client.recurring.save(
        recurring_id,
        task,
        schedule.cron,
        every=schedule.every,
        args=parse_json_field(form, "args", list),
        kwargs=parse_json_field(form, "kwargs", dict),
        timezone=schedule.timezone,
        misfire_policy=schedule.misfire_policy,
        jitter=schedule.jitter,
        catch_up_window=schedule.catch_up_window,
        max_runs=schedule.max_runs,
        exclude=schedule.exclude,
        overlap=schedule.overlap,
        overlap_timeout=schedule.overlap_timeout,
        pause_after_failures=schedule.pause_after_failures,
        mode="create",
        **options,
    )


def recurring_new() -> Any:
    if request.method == "GET":
        return _page(None, None, None)
    form = request.form
    try:
        schedule = _schedule(form)
        if form.get("preview"):
            return _page(form, None, _preview(schedule))
        require_confirmation(form)
        saved = _create(schedule)
    except (InvalidJobError, BadInput) as exc:
        return _page(form, str(exc), None), 400
    audit("recurring_create", [saved.id], saved.schedule.describe())
    flash(f"recurring job {saved.id} created: {saved.schedule.describe()}")
    return redirect(url_for("recurring"), 303)


def _page(form: Any, error: str | None, preview: dict[str, Any] | None) -> str:
    return render_template(
        "recurring_new.html",
        form=form,
        error=error,
        preview=preview,
        policies=MISFIRE_POLICIES,
        overlaps=OVERLAP_POLICIES,
    )


def register(app: Flask) -> None:
    app.add_url_rule("/recurring/new", "recurring_new", recurring_new, methods=["GET", "POST"])
