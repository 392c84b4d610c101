"""``/api/v1/jobs``: the Jobs page's list (its filters, keyset paging), one job, scheduling one
(``POST /jobs``: 201 when created, 200 when an existing id or a unique key's holder answers), and
the job actions (cancel, reschedule, run now). Each action leaves one audit line, as on the
pages; the answers are the shapes of ``parallel_scheduler.views``, the command line's ``--json``
output."""

from __future__ import annotations

from flask import Blueprint, Response, request

from parallel_scheduler.dashboard.api.body import (
    json_body,
    optional_instant,
    optional_number,
    path_id,
    typed,
)
from parallel_scheduler.dashboard.api.guard import ApiError, found, read_storage, reply
from parallel_scheduler.dashboard.browse import fetch_page
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import read_filter
from parallel_scheduler.dashboard.inputs import BadInput, cursor_text, parse_cursor, parse_int
from parallel_scheduler.dashboard.scheduling import schedule_job
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.timeline import read_outcomes
from parallel_scheduler.views import cancel_view, job_detail_view, job_view, reschedule_view
from storage_adapters import JobRecord, JobState

__all__ = ["PAGE_SIZE", "SCHEDULE_FIELDS", "register"]

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
#: The fields of a ``POST /jobs`` body (only ``task`` is required).
SCHEDULE_FIELDS = (
    "task",
    "args",
    "kwargs",
    "eta",
    "countdown",
    "id",
    "queue",
    "unique_key",
    "on_conflict",
)


def _existing(job_id: str) -> JobRecord:
    storage = dashboard().client.storage
    return found(read_storage(lambda: storage.get_job(job_id)), f"job with id {job_id!r}")


def _conflict(job_id: str, verb: str, allowed: str) -> ApiError:
    """Why ``verb`` changed nothing: the job is missing (404) or in another state (409)."""
    record = _existing(job_id)
    state = record.state.value if isinstance(record.state, JobState) else str(record.state)
    return ApiError(409, "conflict", f"job {job_id!r} is {state}: only {allowed} job can be {verb}")


def list_jobs() -> Response:
    board = dashboard()
    wanted = read_filter(request.args, default_state=None)
    limit = parse_int(request.args, "limit", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    after = parse_cursor(request.args)
    page = fetch_page(board.client.storage, wanted, after, limit, board.client.retry_for)
    return reply(
        {
            "jobs": [job_view(record) for record in page.rows],
            "next": None if page.next_after is None else cursor_text(*page.next_after),
            "scanned": page.scanned,
            "bounded": page.bounded,
        }
    )


def get_job(job_id: str) -> Response:
    """The job with its timeline (created, claimed, sent, then what the workers recorded), as
    ``parallel-scheduler show --json`` prints it."""
    job_id = path_id(job_id)
    record = _existing(job_id)
    client = dashboard().client
    events = call_storage(
        lambda: read_outcomes(client.storage, job_id), give_up_after=client.retry_for
    )
    return reply(job_detail_view(record, events))


def create_job() -> Response:
    """Schedule one job through ``Client.schedule`` (its checks, its words: a 400, nothing
    written). ``unique_key`` and ``on_conflict`` go to the client as sent, so a bad one is
    refused in the words of every other door."""
    body = json_body(SCHEDULE_FIELDS)
    task = typed(body, "task", "text")
    if task is None:
        raise BadInput("task: the task name is required")
    queue = typed(body, "queue", "text")
    view = schedule_job(
        task,
        typed(body, "args", "list", []),
        typed(body, "kwargs", "object", {}),
        eta=optional_instant(body, "eta"),
        countdown=optional_number(body, "countdown"),
        job_id=typed(body, "id", "text"),
        unique_key=body.get("unique_key"),
        on_conflict=body.get("on_conflict"),
        options={} if queue is None else {"queue": queue},
        action="api_schedule",
    )
    return reply(view, 201 if view["created"] else 200)


def cancel_job(job_id: str) -> Response:
    job_id = path_id(job_id)
    json_body(())
    done = dashboard().client.cancel(job_id)
    audit("api_cancel", [job_id], f"done={done}")
    if not done:
        raise _conflict(job_id, "cancelled", "a scheduled or held")
    return reply(cancel_view(job_id, True))


def _moved(job_id: str, done: bool, action: str, detail: str) -> Response:
    audit(action, [job_id], f"{detail} done={done}".strip())
    if not done:
        raise _conflict(job_id, "rescheduled", "a scheduled, held or failed")
    return reply(reschedule_view(job_id, True, _existing(job_id)))


def reschedule_job(job_id: str) -> Response:
    job_id = path_id(job_id)
    body = json_body(("eta", "countdown"))
    eta = optional_instant(body, "eta")
    countdown = optional_number(body, "countdown")
    if (eta is None) == (countdown is None):
        raise BadInput("give either eta (an ISO 8601 date-time) or countdown (seconds), not both")
    client = dashboard().client
    if countdown is not None:
        done = client.reschedule(job_id, countdown=countdown)
        return _moved(job_id, done, "api_reschedule", f"countdown={countdown}")
    assert eta is not None
    done = client.reschedule(job_id, eta=eta)
    return _moved(job_id, done, "api_reschedule", f"eta={eta.isoformat()}")


def run_job_now(job_id: str) -> Response:
    job_id = path_id(job_id)
    json_body(())
    client = dashboard().client
    now = call_storage(client.storage.now, give_up_after=client.retry_for)
    return _moved(job_id, client.reschedule(job_id, eta=now), "api_run_now", "")


def register(api: Blueprint) -> None:
    api.add_url_rule("/jobs", "jobs", list_jobs)
    api.add_url_rule("/jobs", "jobs_create", create_job, methods=["POST"])
    api.add_url_rule("/jobs/<job_id>", "job", get_job)
    api.add_url_rule("/jobs/<job_id>/cancel", "cancel", cancel_job, methods=["POST"])
    api.add_url_rule("/jobs/<job_id>/reschedule", "reschedule", reschedule_job, methods=["POST"])
    api.add_url_rule("/jobs/<job_id>/run-now", "run_now", run_job_now, methods=["POST"])
