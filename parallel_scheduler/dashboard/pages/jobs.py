"""The Jobs pages: the filtered, keyset-paged list, one job's detail, and the job actions
(cancel, reschedule, run now, bulk cancel). Every action is a POST carrying the CSRF token
(checked in ``app``) and a ticked confirmation box, and leaves one audit line."""

from __future__ import annotations

from typing import Any

from flask import Flask, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.dashboard.browse import SCAN_BOUND, count_matches, fetch_page, matching
from parallel_scheduler.dashboard.context import audit, dashboard, viewer_zone
from parallel_scheduler.dashboard.forms import filter_args, read_filter, require_confirmation
from parallel_scheduler.dashboard.inputs import (
    TRAIL_DEPTH,
    BadInput,
    cursor_text,
    parse_cursor,
    parse_instant,
    parse_int,
    parse_job_id,
    parse_seconds,
    parse_text,
    parse_trail,
    parse_zone,
)
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.jobs import Job
from parallel_scheduler.timeline import job_timeline, read_outcomes
from storage_adapters import JobState

__all__ = ["BULK_LIMIT", "register"]

#: Jobs one bulk cancel acts on at most.
BULK_LIMIT = 10_000
#: Jobs the preview counts at most: a page must stay fast; the cancel itself reads the set again.
PREVIEW_LIMIT = 1_000
PAGE_SIZE = 50
#: The page sizes offered (any from 1 to 500 may be asked with ``limit``).
PAGE_SIZES = (25, 50, 100, 200)


def jobs() -> Any:
    if parse_text(request.args, "id", 1000):
        job_id = parse_job_id(request.args)
        return redirect(url_for("job", id=job_id))
    board = dashboard()
    wanted = read_filter(request.args)
    limit = parse_int(request.args, "limit", PAGE_SIZE, 1, 500)
    after = parse_cursor(request.args)
    trail = parse_trail(request.args.getlist("back"))
    storage, retry_for = board.client.storage, board.client.retry_for
    page = fetch_page(storage, wanted, after, limit, retry_for, scan_bound=SCAN_BOUND)
    args: dict[str, Any] = dict(filter_args(request.args))
    if limit != PAGE_SIZE:
        args["limit"] = str(limit)
    return render_template(
        "jobs.html",
        rows=[Job.from_record(record) for record in page.rows],
        page=page,
        wanted=wanted,
        args=args,
        values=request.args,
        states=[s.value for s in JobState],
        **_pager(args, after, trail, page.next_after),
        limit=limit,
        page_sizes=PAGE_SIZES,
        size_urls={n: url_for("jobs", **{**args, "limit": str(n)}) for n in PAGE_SIZES},
        matches=count_matches(
            board.client.storage,
            board.client.storage.count_by_state,
            wanted,
            board.client.retry_for,
        ),
        scan_bound=SCAN_BOUND,
        bulk_limit=BULK_LIMIT,
    )


def _pager(
    args: dict[str, Any],
    after: tuple[float, str] | None,
    trail: list[str],
    next_after: tuple[float, str] | None,
) -> dict[str, str | None]:
    """The first, previous and next page links: storage pages forwards only (keyset on
    ``(due_at, id)``), so each link carries the cursors of the pages before it (``back``)."""
    here = "" if after is None else cursor_text(*after)
    urls: dict[str, str | None] = {"first_url": None, "prev_url": None, "next_url": None}
    if after is not None:
        urls["first_url"] = url_for("jobs", **args)
        previous = trail[-1] if trail else ""
        if previous:
            urls["prev_url"] = url_for("jobs", **args, after=previous, back=trail[:-1])
        else:
            urls["prev_url"] = urls["first_url"]
    if next_after is not None:
        back = [*trail, here][-TRAIL_DEPTH:]
        urls["next_url"] = url_for("jobs", **args, after=cursor_text(*next_after), back=back)
    return urls


def job() -> Any:
    job_id = parse_job_id(request.args)
    board = dashboard()
    record = call_storage(
        lambda: board.client.storage.get_job(job_id), give_up_after=board.client.retry_for
    )
    if record is None:
        return render_template(
            "message.html", title="No such job", status=404, message=f"no job with id {job_id!r}"
        ), 404
    events = call_storage(
        lambda: read_outcomes(board.client.storage, job_id), give_up_after=board.client.retry_for
    )
    timeline = job_timeline(record, events)
    return render_template(
        "job.html", job=Job.from_record(record), record=record, timeline=timeline
    )


def _reschedule(job_id: str) -> tuple[str, bool]:
    client = dashboard().client
    seconds = parse_seconds(request.form, "seconds")
    zone = parse_zone(request.form, "when_tz") or viewer_zone()
    when = parse_instant(request.form, "when", zone)
    if (seconds is None) == (when is None):
        raise BadInput("give either a new due time (when) or seconds from now, not both")
    if seconds is not None:
        return f"countdown={seconds}", client.reschedule(job_id, countdown=seconds)
    return f"eta={when}", client.reschedule(job_id, eta=when)


def job_action() -> Response:
    form = request.form
    job_id = parse_job_id(form)
    action = parse_text(form, "action", 20)
    if action not in ("cancel", "reschedule", "run_now"):
        raise BadInput(f"action {action!r} is not one of cancel, reschedule, run_now")
    require_confirmation(form)
    client = dashboard().client
    if action == "cancel":
        detail, done = "", client.cancel(job_id)
    elif action == "run_now":
        now = call_storage(client.storage.now, give_up_after=client.retry_for)
        detail, done = "", client.reschedule(job_id, eta=now)
    else:
        detail, done = _reschedule(job_id)
    audit(action, [job_id], f"{detail} done={done}".strip())
    verb = {"cancel": "cancelled", "run_now": "due now", "reschedule": "rescheduled"}[action]
    if done:
        flash(f"job {job_id} {verb}")
    else:
        flash(f"job {job_id} was not {verb}: it is missing or no longer scheduled")
    return redirect(url_for("job", id=job_id), 303)


def bulk_cancel() -> Any:
    values = request.form if request.method == "POST" else request.args
    wanted = read_filter(values)
    if wanted.state is not JobState.SCHEDULED:
        raise BadInput("only scheduled jobs can be cancelled: filter on state scheduled")
    board = dashboard()
    bound = BULK_LIMIT if request.method == "POST" else PREVIEW_LIMIT
    rows, more = matching(board.client.storage, wanted, bound, board.client.retry_for, bound * 5)
    if request.method == "GET":
        return render_template(
            "bulk_cancel.html",
            count=len(rows),
            more=more,
            sample=[Job.from_record(r) for r in rows[:20]],
            args=filter_args(values),
            bulk_limit=BULK_LIMIT,
        )
    require_confirmation(values)
    cancelled = [record.id for record in rows if board.client.cancel(record.id)]
    audit("bulk_cancel", cancelled, f"matched={len(rows)} filter={filter_args(values)}")
    flash(f"cancelled {len(cancelled)} of {len(rows)} matching jobs")
    back: dict[str, Any] = dict(filter_args(values))
    return redirect(url_for("jobs", **back), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/jobs", "jobs", jobs)
    app.add_url_rule("/jobs/detail", "job", job)
    app.add_url_rule("/jobs/action", "job_action", job_action, methods=["POST"])
    app.add_url_rule("/jobs/bulk-cancel", "bulk_cancel", bulk_cancel, methods=["GET", "POST"])
