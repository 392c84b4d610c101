"""The OpenAPI 3.1 document of the HTTP API, served at ``/api/v1/openapi.json``: the one place
each operation, parameter, body and answer is described. Its component schemas (the shapes of
the answers) are ``schemas.py``; the tests (schemathesis) check every answer against it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from parallel_scheduler.dashboard.api.guard import CSRF_HEADER
from parallel_scheduler.dashboard.api.schedule_schemas import SCHEDULE_SCHEMAS
from parallel_scheduler.dashboard.api.schemas import SCHEMAS, ref
from parallel_scheduler.version import __version__
from storage_adapters import JobState, PauseKind
from storage_adapters.checks.outcomes import FINAL_OUTCOMES

__all__ = ["document", "paths"]

_ERRORS = {
    400: "bad input: the message names the field and the problem",
    401: "authentication required",
    403: "read-only dashboard (read_only), or a state change without the CSRF token (csrf)",
    404: "no such job, recurring job, pause or rate limit",
    409: "the job or recurring job is in a state that does not allow this",
    503: "storage could not be reached",
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _param(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema,
    }


def _op(
    summary: str,
    ok: tuple[int, str],
    errors: tuple[int, ...],
    params: tuple[dict[str, Any], ...] = (),
    body: str | None = None,
) -> dict[str, Any]:
    status, shape = ok
    responses = {str(status): _json(ref(shape), "done")}
    for code in sorted({400, 401, 503, *errors}):
        responses[str(code)] = _json(ref("Error"), _ERRORS[code])
    op: dict[str, Any] = {"summary": summary, "parameters": list(params), "responses": responses}
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref(body)}},
        }
    return op


def _optional_body(op: dict[str, Any]) -> dict[str, Any]:
    """``op`` whose body may be left out (its fields all have defaults)."""
    op["requestBody"]["required"] = False
    return op


def _scheduled(op: dict[str, Any]) -> dict[str, Any]:
    """``op`` answering 200 too: nothing created (an existing id, or a unique key's holder kept
    or replaced)."""
    op["responses"]["200"] = _json(ref("Scheduled"), "an existing job answers: nothing created")
    return op


_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_CURSOR = {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?:[!-~]{1,200}$"}
JOB_ID = _param("job_id", "path", "a job id", _ID)
RECURRING_ID = _param("recurring_id", "path", "a recurring job id", _ID)
_CALENDAR = (
    _param(
        "name",
        "path",
        "the calendar's name (1-100 printable characters, no spaces or commas)",
        {"type": "string", "minLength": 1, "maxLength": 100},
    ),
)
_PAUSE = (
    _param(
        "kind",
        "path",
        "what the pause or limit names",
        {"enum": [kind.value for kind in PauseKind]},
    ),
    _param(
        "name",
        "path",
        "the queue or task name (1-255 printable characters, no surrounding spaces)",
        {"type": "string", "minLength": 1, "maxLength": 255},
    ),
)
_LIST = (
    _param(
        "state",
        "query",
        "a job state, or any (the default)",
        {"enum": ["any", *(s.value for s in JobState)]},
    ),
    _param("task", "query", "the task name", {"type": "string", "maxLength": 255}),
    _param(
        "id_prefix",
        "query",
        "only jobs whose id starts with this (exact characters, case included; no space)",
        {"type": "string", "maxLength": 200},
    ),
    _param(
        "task_prefix",
        "query",
        "only jobs whose task name starts with this (exact characters, case included)",
        {"type": "string", "maxLength": 255},
    ),
    _param("queue", "query", "the queue option (filtered by a bounded scan)", {"type": "string"}),
    _param("error", "query", "1: only jobs with a last error", {"enum": ["0", "1"]}),
    _param(
        "error_contains",
        "query",
        "only jobs whose last error contains this text, case included (a bounded scan: see "
        "scanned and bounded)",
        {"type": "string", "maxLength": 500},
    ),
    _param(
        "due_from",
        "query",
        "ISO 8601, UTC without offset",
        {"type": "string", "format": "date-time"},
    ),
    _param(
        "due_to", "query", "ISO 8601, UTC without offset", {"type": "string", "format": "date-time"}
    ),
    _param(
        "after",
        "query",
        "the next cursor of the previous page: <due time>:<job id>",
        _CURSOR,
    ),
    _param(
        "limit",
        "query",
        "rows per page (default 50)",
        {"type": "integer", "minimum": 1, "maximum": 500},
    ),
)
_PAGE = (
    _param(
        "limit",
        "query",
        "rows per page (default 100)",
        {"type": "integer", "minimum": 1, "maximum": 500},
    ),
    _param(
        "offset", "query", "rows to skip", {"type": "integer", "minimum": 0, "maximum": 10_000_000}
    ),
)
_OUTCOMES = (
    _param("state", "query", "a final outcome", {"enum": [s.value for s in FINAL_OUTCOMES]}),
    _param("task", "query", "the task name", {"type": "string", "maxLength": 255}),
    _param("before", "query", "the next cursor of the previous page", _CURSOR),
    _param(
        "limit",
        "query",
        "rows per page (default 50)",
        {"type": "integer", "minimum": 1, "maximum": 500},
    ),
)
_CHANGE = (403, 404, 409)


def paths() -> dict[str, Any]:
    """Every operation of the API by its path (relative to ``/api/v1``) and method."""
    job, rec = (JOB_ID,), (RECURRING_ID,)
    return {
        "/jobs": {
            "get": _op("List jobs, earliest due first (keyset paged)", (200, "JobPage"), (), _LIST),
            "post": _scheduled(
                _op(
                    "Schedule one job (unique_key: at most one scheduled job of the task per key)",
                    (201, "Scheduled"),
                    (403,),
                    (),
                    "ScheduleJob",
                )
            ),
        },
        "/jobs/{job_id}": {
            "get": _op("One job with its timeline", (200, "JobDetail"), (404,), job)
        },
        "/jobs/{job_id}/cancel": {
            "post": _op("Cancel a scheduled (or held) job", (200, "Cancelled"), _CHANGE, job)
        },
        "/jobs/{job_id}/reschedule": {
            "post": _op(
                "Move a scheduled job's due time, or queue a failed job again",
                (200, "Rescheduled"),
                _CHANGE,
                job,
                "Reschedule",
            )
        },
        "/jobs/{job_id}/run-now": {
            "post": _op("Make a job due now", (200, "Rescheduled"), _CHANGE, job)
        },
        "/recurring": {
            "get": _op(
                "List recurring jobs by id (offset paged)", (200, "RecurringPage"), (), _PAGE
            ),
            "post": _op(
                "Create a recurring job", (201, "Recurring"), (403, 409), (), "RecurringCreate"
            ),
        },
        "/recurring/{recurring_id}": {
            "get": _op("One recurring job", (200, "Recurring"), (404,), rec),
            "put": _op(
                "Replace a recurring job's schedule and call",
                (200, "Recurring"),
                (403, 404),
                rec,
                "RecurringUpdate",
            ),
            "patch": _op(
                "Change only the fields given; the others keep their stored values",
                (200, "Recurring"),
                (403, 404, 409),
                rec,
                "RecurringEdit",
            ),
            "delete": _op(
                "Remove a recurring job (its firings stay)", (200, "Removed"), (403, 404), rec
            ),
        },
        "/recurring/{recurring_id}/pause": {
            "post": _optional_body(
                _op(
                    "Stop firing until resumed, with a note (who: the caller)",
                    (200, "Recurring"),
                    (403, 404),
                    rec,
                    "RecurringPause",
                )
            )
        },
        "/recurring/{recurring_id}/resume": {
            "post": _op("Fire again from the next tick", (200, "Recurring"), (403, 404), rec)
        },
        "/recurring/{recurring_id}/trigger": {
            "post": _op("Fire once now, outside the schedule", (200, "Triggered"), _CHANGE, rec)
        },
        "/recurring/{recurring_id}/backfill": {
            "post": _op(
                "Fire every tick of a past range once (overlap skip: only its latest)",
                (200, "Backfilled"),
                _CHANGE,
                rec,
                "BackfillRange",
            )
        },
        "/pauses": {
            "get": _op("The pauses of queues and tasks in force", (200, "PauseList"), ()),
            "post": _op(
                "Pause a queue or a task: hold its scheduled jobs until resumed",
                (201, "Paused"),
                (403,),
                (),
                "PauseCreate",
            ),
        },
        "/pauses/{kind}/{name}": {
            "delete": _op(
                "Resume a queue or a task: its held jobs are scheduled again, in due order",
                (200, "Resumed"),
                (403, 404),
                _PAUSE,
            )
        },
        "/calendars": {
            "get": _op("The calendars of excluded dates", (200, "CalendarList"), ()),
        },
        "/calendars/{name}": {
            "get": _op("One calendar of excluded dates", (200, "Calendar"), (404,), _CALENDAR),
            "put": _op(
                "Create a calendar of excluded dates, or replace it whole",
                (200, "Calendar"),
                (403, 404),
                _CALENDAR,
                "CalendarPut",
            ),
            "delete": _op(
                "Delete a calendar (recurring jobs naming it fire as if it were empty)",
                (200, "CalendarRemoved"),
                (403, 404),
                _CALENDAR,
            ),
        },
        "/limits": {
            "get": _op("The rate limits of queues and tasks in force", (200, "LimitList"), ()),
            "post": _op(
                "Rate-limit a queue or a task (replacing its limit): one budget every scheduler "
                "spends from as it releases jobs",
                (201, "Limited"),
                (403,),
                (),
                "LimitCreate",
            ),
        },
        "/limits/{kind}/{name}": {
            "delete": _op(
                "Remove a rate limit (jobs already waiting for a slot keep it)",
                (200, "Unlimited"),
                (403, 404),
                _PAUSE,
            )
        },
        "/outcomes": {
            "get": _op(
                "The newest final outcomes (keyset paged)", (200, "OutcomePage"), (), _OUTCOMES
            )
        },
        "/outcomes/counts": {
            "get": _op("Final outcomes per task and outcome", (200, "OutcomeCounts"), ())
        },
        "/status": {
            "get": _op("Counts, next due, lag, locks and scheduler instances", (200, "Status"), ())
        },
        "/csrf-token": {"get": _op("This browser session's CSRF token", (200, "CsrfToken"), ())},
    }


@lru_cache(maxsize=16)
def document(server: str) -> dict[str, Any]:
    """The OpenAPI document, its server the API's URL path where the app is mounted."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "parallel-scheduler dashboard API",
            "version": __version__,
            "description": (
                "Jobs, recurring jobs, pauses, rate limits, calendars and status. Auth: the "
                "dashboard's basic auth or bearer token. A state change not made with a bearer "
                "token needs the "
                f"{CSRF_HEADER} header (GET /csrf-token). "
                'Errors: {"error": {"code", "message"}}.'
            ),
        },
        "servers": [{"url": server}],
        "paths": paths(),
        "components": {
            "schemas": {**SCHEMAS, **SCHEDULE_SCHEMAS},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}, {}],
    }
