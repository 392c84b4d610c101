"""The Recurring page: every recurring job with its schedule, its recent firings and the last
outcome (the newest firing's latest recorded outcome, as a state badge; one storage read for the
page's firings, never one per row); pause (with a note; who is the viewer), resume, trigger now,
remove; and the edit form. A paused job shows its note, who paused it and since when.

The edit form changes the schedule, the arguments and keyword arguments (JSON) and the queue, and
saves the whole recurring job with ``client.recurring.save(..., mode="update")``, whose validation
is the API's own: a refused form (bad JSON names its field; an ``InvalidJobError``) is shown again
with the reason, and nothing is written. A field the form leaves out keeps its stored value, and
so does every send option other than the queue."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, cast

from flask import Flask, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.calendars import calendar_names
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import parse_json_field, require_confirmation
from parallel_scheduler.dashboard.inputs import (
    BACKFILL_OVERLAPS,
    BadInput,
    parse_backfill_overlap,
    parse_instant,
    parse_int,
    parse_job_id,
    parse_seconds,
    parse_text,
)
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jobs import utc_datetime
from parallel_scheduler.recurring.jobs import RecurringJob
from parallel_scheduler.recurring.max_runs import max_runs_arg
from parallel_scheduler.recurring.overlap_policy import OVERLAP_POLICIES, seconds_arg
from parallel_scheduler.recurring.triggers import MisfirePolicy
from storage_adapters import InvalidIdentifierError, OutcomeStore, validate_job_id
from storage_adapters.checks.pauses import MAX_PAUSE_NOTE_LENGTH, MAX_PAUSED_BY_LENGTH

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
        note_limit=MAX_PAUSE_NOTE_LENGTH,
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
        if firing.job_id is not None and _readable_id(firing.job_id)
    ]
    if not ids or not isinstance(store, OutcomeStore):
        return {}
    latest = call_storage(lambda: store.latest_outcomes(ids), give_up_after=client.retry_for)
    return {job_id: event.state.value for job_id, event in latest.items()}


def _readable_id(job_id: str) -> bool:
    """Whether a history entry's job id is one a store can look up (an entry written by hand
    may hold anything: it is shown, with no outcome, and never breaks the page)."""
    try:
        validate_job_id(job_id)
    except InvalidIdentifierError:
        return False
    return True


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
    if action == "pause":  # a note storage refuses is the error page's 400, nothing written
        who = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None
        done = jobs.pause(recurring_id, note=form.get("note", ""), by=who)
    elif action == "resume":
        done = jobs.resume(recurring_id)
    elif action == "trigger":
        detail, done = f"firing={jobs.trigger(recurring_id)}", True
    else:
        done = jobs.remove(recurring_id)
    audit(f"recurring_{action}", [recurring_id], f"{detail} done={done}".strip())
    flash(f"recurring job {recurring_id}: {action} {'done' if done else 'changed nothing'}")
    return redirect(url_for("recurring"), 303)


def _call(found: RecurringJob, form: Mapping[str, str]) -> tuple[Any, Any, dict[str, Any]]:
    """The arguments, keyword arguments and send options to save: each field the form gives
    (``args`` a JSON array, ``kwargs`` a JSON object, a blank ``queue`` none), else as stored.
    The send options other than the queue are always kept."""
    args = parse_json_field(form, "args", list) if "args" in form else found.args
    kwargs = parse_json_field(form, "kwargs", dict) if "kwargs" in form else found.kwargs
    options = dict(found.options or {})
    if "queue" in form:
        queue = parse_text(form, "queue", 255)
        if queue is None:
            options.pop("queue", None)
        else:
            options["queue"] = queue
    return args, kwargs, options


def _save(found: RecurringJob) -> RecurringJob:
    """The edited recurring job, saved whole through the API (its validation, its error
    messages); every field is read and checked before anything is written."""
    form = request.form
    schedule = found.schedule
    if "cron" in form or "every" in form:
        cron = parse_text(form, "cron", 200) or ""
        every = parse_seconds(form, "every")
    else:
        cron, every = schedule.cron, schedule.every
    policy: str = schedule.misfire_policy
    zone = schedule.timezone
    if "misfire_policy" in form:
        policy = parse_text(form, "misfire_policy", 20) or "run_once"
    if policy not in MISFIRE_POLICIES:
        raise InvalidJobError(f"misfire policy {policy!r} is not one of {MISFIRE_POLICIES}")
    if "timezone" in form:
        zone = parse_text(form, "timezone", 100) or "UTC"
    grace, jitter = parse_seconds(form, "misfire_grace"), parse_seconds(form, "jitter")
    window = schedule.catch_up_window  # an empty field removes it
    if "catch_up_window" in form:
        window = parse_seconds(form, "catch_up_window")
    max_runs: object = schedule.max_runs  # an empty field removes the limit; the count stays
    if "max_runs" in form:  # as typed: what is no whole number the schedule refuses, naming it
        max_runs = max_runs_arg(parse_text(form, "max_runs", 40))
    overlap: object = schedule.overlap  # as typed: the schedule refuses a bad one by name
    if "overlap" in form:
        overlap = parse_text(form, "overlap", 20) or "allow"
    timeout: object = schedule.overlap_timeout  # an empty field: the default
    if "overlap_timeout" in form:
        timeout = seconds_arg(parse_text(form, "overlap_timeout", 40))
    failures: object = schedule.pause_after_failures  # an empty field: never pause
    if "pause_after_failures" in form:  # as typed, refused by the schedule in its words
        failures = max_runs_arg(parse_text(form, "pause_after_failures", 40))
    exclude = schedule.exclude  # an empty field excludes no calendar
    if "exclude" in form:
        exclude = calendar_names([parse_text(form, "exclude", 2000) or ""])
    args, kwargs, options = _call(found, form)
    start = None if schedule.start_at is None else utc_datetime(schedule.start_at)
    end: datetime | None = None if schedule.end_at is None else utc_datetime(schedule.end_at)
    return dashboard().client.recurring.save(
        found.id,
        found.task,
        cron,
        every=every,
        args=args,
        kwargs=kwargs,
        timezone=zone,
        start=start,
        end=end,
        misfire_policy=cast(MisfirePolicy, policy),
        misfire_cap=parse_int(form, "misfire_cap", schedule.misfire_cap, 1, 1_000_000),
        misfire_grace=schedule.misfire_grace if grace is None else grace,
        jitter=schedule.jitter if jitter is None else jitter,
        catch_up_window=window,
        max_runs=max_runs,  # type: ignore[arg-type]
        overlap=overlap,  # type: ignore[arg-type]
        overlap_timeout=timeout,  # type: ignore[arg-type]
        pause_after_failures=failures,  # type: ignore[arg-type]
        exclude=exclude,
        enabled=found.enabled,
        mode="update",
        **options,
    )


def _changed(before: RecurringJob, after: RecurringJob) -> str:
    """What a save changed, for the audit line and the message: ``args,queue`` or ``nothing``."""
    queue_before = (before.options or {}).get("queue")
    queue_after = (after.options or {}).get("queue")
    changes = (
        ("schedule", before.schedule != after.schedule),
        ("args", before.args != after.args),
        ("kwargs", before.kwargs != after.kwargs),
        ("queue", queue_before != queue_after),
    )
    return ",".join(name for name, differs in changes if differs) or "nothing"


def _json_text(value: Any) -> str:
    """A stored argument list or mapping as the text area shows it (``""`` when unreadable)."""
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _edit_page(found: RecurringJob, form: Any, error: str | None) -> str:
    options = found.options or {}
    queue = options.get("queue")
    return render_template(
        "recurring_edit.html",
        job=found,
        form=form,
        error=error,
        policies=MISFIRE_POLICIES,
        overlaps=OVERLAP_POLICIES,
        backfill_overlaps=BACKFILL_OVERLAPS,
        args_text=_json_text(found.args),
        kwargs_text=_json_text(found.kwargs),
        queue="" if queue is None else str(queue),
        other_options=_json_text({k: v for k, v in options.items() if k != "queue"} or None),
    )


def recurring_edit() -> Any:
    values = request.form if request.method == "POST" else request.args
    recurring_id = parse_job_id(values)
    found = _existing(recurring_id)
    if request.method == "GET":
        return _edit_page(found, None, None)
    try:
        require_confirmation(request.form)
        saved = _save(found)
    except (InvalidJobError, BadInput) as exc:
        return _edit_page(found, request.form, str(exc)), 400
    changed = _changed(found, saved)
    audit("recurring_edit", [recurring_id], f"{saved.schedule.describe()} changed={changed}")
    flash(f"recurring job {recurring_id} saved ({changed} changed): {saved.schedule.describe()}")
    return redirect(url_for("recurring"), 303)


def recurring_backfill() -> Any:
    """The edit page's backfill form: every tick from ``from`` to ``to`` fired once (an instant
    without an offset is read in UTC)."""
    form = request.form
    found = _existing(parse_job_id(form))
    try:
        require_confirmation(form)
        start = parse_instant(form, "from", timezone.utc)
        end = parse_instant(form, "to", timezone.utc)
        if start is None or end is None:
            raise BadInput("from and to are required: the range to backfill")
        overlap = parse_backfill_overlap(form)
        done = dashboard().client.recurring.backfill(
            found.id, utc_datetime(start), utc_datetime(end), overlap
        )
    except (InvalidJobError, BadInput) as exc:
        return _edit_page(found, None, f"backfill: {exc}"), 400
    audit(
        "recurring_backfill",
        [found.id],
        f"from={start!r} to={end!r} overlap={overlap} {done.to_dict()}",
    )
    flash(f"recurring job {found.id} backfilled: {done.summary()}")
    return redirect(url_for("recurring"), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/recurring", "recurring", recurring)
    app.add_url_rule("/recurring/action", "recurring_action", recurring_action, methods=["POST"])
    app.add_url_rule("/recurring/edit", "recurring_edit", recurring_edit, methods=["GET", "POST"])
    app.add_url_rule(
        "/recurring/backfill", "recurring_backfill", recurring_backfill, methods=["POST"]
    )
