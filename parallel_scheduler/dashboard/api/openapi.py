"""The OpenAPI 3.1 document of the HTTP API, served at ``/api/v1/openapi.json``: the one place
each operation, parameter, body and answer is described. The shapes it describes are made by
``parallel_scheduler.views`` (jobs, recurring jobs, the answers to actions) and
``process.status_report`` (status); the tests (schemathesis) check every answer against it.

Rows the store holds that this version cannot read are still shown, flagged in ``problem``, so
the fields of a job or recurring job are typed loosely enough to carry a flagged row too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from parallel_scheduler.dashboard.api.guard import CSRF_HEADER
from parallel_scheduler.version import __version__
from storage_adapters import JobState, OutcomeState
from storage_adapters.checks.outcomes import FINAL_OUTCOMES

__all__ = ["SCHEMAS", "document", "paths"]

_TEXT = {"type": "string"}
_MAYBE_TEXT = {"type": ["string", "null"]}
_ANY: dict[str, Any] = {}
_INSTANT = {"type": "string", "description": "ISO 8601; a flagged row's raw stored value"}
_MAYBE_INSTANT = {"type": ["string", "null"], "description": _INSTANT["description"]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: tuple[str, ...], extra: bool = True, **props: Any) -> dict[str, Any]:
    shape: dict[str, Any] = {"type": "object", "required": list(required), "properties": props}
    if not extra:
        shape["additionalProperties"] = False
    return shape


_CALL: dict[str, Any] = {
    "id": _TEXT,
    "task": _TEXT,
    "args": {"type": ["array", "null"]},
    "kwargs": {"type": ["object", "null"]},
    "options": {"type": ["object", "null"]},
    "problem": {**_MAYBE_TEXT, "description": "what is wrong with the stored row; null if none"},
}
_SAVE: dict[str, Any] = {
    "task": {**_TEXT, "description": "the task name each firing is sent as (required)"},
    "cron": {**_TEXT, "description": "5 fields, or 6 with seconds first; or give every"},
    "every": {"type": ["number", "null"], "description": "an interval in seconds"},
    "args": {"type": "array"},
    "kwargs": {"type": "object"},
    "timezone": {**_TEXT, "description": "an IANA zone the cron is read in (default UTC)"},
    "start": {"type": ["string", "null"], "format": "date-time"},
    "end": {"type": ["string", "null"], "format": "date-time"},
    "misfire_policy": {"enum": ["skip", "run_once", "run_all"]},
    "misfire_cap": {"type": "integer", "minimum": 1},
    "misfire_grace": {"type": "number", "minimum": 0},
    "enabled": {"type": "boolean"},
    "options": {"type": "object", "description": "send options: queue, priority, headers, ..."},
}
SCHEMAS: dict[str, Any] = {
    "Error": _object(
        ("error",),
        error=_object(
            ("code", "message"),
            code={**_TEXT, "description": "e.g. bad_request, not_found, conflict, read_only"},
            message={**_TEXT, "description": "names the problem"},
        ),
    ),
    "Job": _object(
        ("id", "task", "due_at", "state", "problem"),
        **_CALL,
        due_at=_INSTANT,
        state={**_TEXT, "description": ", ".join(s.value for s in JobState)},
        attempts={"type": ["integer", "string"]},
        created_at=_MAYBE_INSTANT,
        updated_at=_MAYBE_INSTANT,
        last_error=_MAYBE_TEXT,
    ),
    "JobDetail": {
        "allOf": [
            _ref("Job"),
            _object(
                ("timeline",),
                timeline={
                    "type": "array",
                    "description": "every state change, oldest first (show --json's)",
                    "items": _object(("at", "state"), at=_MAYBE_TEXT, state=_TEXT),
                },
            ),
        ]
    },
    "Outcome": _object(
        ("job_id", "task", "state", "at"),
        job_id=_TEXT,
        task=_TEXT,
        state={"enum": [s.value for s in OutcomeState]},
        at=_MAYBE_TEXT,
        worker=_MAYBE_TEXT,
        runtime={"type": ["number", "null"]},
        error=_MAYBE_TEXT,
        retry_id=_MAYBE_TEXT,
    ),
    "OutcomePage": _object(
        ("outcomes", "next", "recorded"),
        outcomes={"type": "array", "items": _ref("Outcome")},
        next={**_MAYBE_TEXT, "description": "the cursor of the next page (before=); null: last"},
        recorded={"type": "boolean", "description": "false: the store keeps no outcomes"},
    ),
    "OutcomeCounts": _object(
        ("counts", "recorded"),
        counts={
            "type": "object",
            "description": "per task, per final outcome",
            "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        recorded={"type": "boolean"},
    ),
    "JobPage": _object(
        ("jobs", "next", "scanned", "bounded"),
        jobs={"type": "array", "items": _ref("Job")},
        next={**_MAYBE_TEXT, "description": "the cursor of the next page (after=); null: last"},
        scanned={"type": "integer", "description": "rows read for this page"},
        bounded={"type": "boolean", "description": "the scan stopped at its bound"},
    ),
    "Recurring": _object(
        ("id", "task", "enabled", "problem"),
        **_CALL,
        cron=_MAYBE_TEXT,
        every={"type": ["number", "string", "null"]},
        timezone=_MAYBE_TEXT,
        misfire_policy=_MAYBE_TEXT,
        enabled={"type": "boolean"},
        next_run_at=_MAYBE_INSTANT,
        last_run_at=_MAYBE_INSTANT,
        recent_firings={"type": "array", "items": {"type": "object"}},
    ),
    "RecurringPage": _object(
        ("recurring", "next_offset"),
        recurring={"type": "array", "items": _ref("Recurring")},
        next_offset={"type": ["integer", "null"], "description": "offset= of the next page"},
    ),
    "RecurringCreate": _object(("id", "task"), False, id=_TEXT, **_SAVE),
    "RecurringUpdate": _object(("task",), False, **_SAVE),
    "Reschedule": {
        **_object(
            (),
            False,
            eta={"type": "string", "format": "date-time"},
            countdown={"type": "number", "minimum": 0},
        ),
        "description": "exactly one of eta (ISO 8601; UTC without an offset) and countdown",
    },
    "Cancelled": _object(("id", "cancelled"), id=_TEXT, cancelled={"type": "boolean"}),
    "Rescheduled": _object(
        ("id", "rescheduled", "due_at"), id=_TEXT, rescheduled={"type": "boolean"}, due_at=_ANY
    ),
    "Triggered": _object(("id", "job_id"), id=_TEXT, job_id=_TEXT),
    "Removed": _object(("id", "removed"), id=_TEXT, removed={"type": "boolean"}),
    "Status": _object(
        ("storage", "counts", "lag_seconds", "schedulers", "problem", "problems"),
        storage=_TEXT,
        counts={"type": "object", "additionalProperties": {"type": "integer"}},
        next_due_at=_MAYBE_TEXT,
        next_due_in_seconds={"type": ["number", "null"]},
        lag_seconds={"type": "number", "description": "how long the earliest due job waits"},
        lock_holder={"type": ["object", "null"]},
        recurring_jobs={"type": "integer"},
        recurring_lock_holder=_MAYBE_TEXT,
        schedulers={"type": "array", "items": {"type": "object"}},
        settings={"type": "object"},
        problem={**_MAYBE_TEXT, "description": "what could not be read; null if all could"},
        problems={
            "type": "array",
            "description": "health problems (status --check): none when healthy",
            "items": _object(("kind", "message"), kind=_TEXT, message=_TEXT),
        },
    ),
    "CsrfToken": _object(("csrf_token", "header"), csrf_token=_TEXT, header=_TEXT),
}

_ERRORS = {
    400: "bad input: the message names the field and the problem",
    401: "authentication required",
    403: "read-only dashboard (read_only), or a state change without the CSRF token (csrf)",
    404: "no such job or recurring job",
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
    responses = {str(status): _json(_ref(shape), "done")}
    for code in sorted({400, 401, 503, *errors}):
        responses[str(code)] = _json(_ref("Error"), _ERRORS[code])
    op: dict[str, Any] = {"summary": summary, "parameters": list(params), "responses": responses}
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(body)}},
        }
    return op


_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_CURSOR = {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?:[!-~]{1,200}$"}
JOB_ID = _param("job_id", "path", "a job id", _ID)
RECURRING_ID = _param("recurring_id", "path", "a recurring job id", _ID)
_LIST = (
    _param(
        "state",
        "query",
        "a job state, or any (the default)",
        {"enum": ["any", *(s.value for s in JobState)]},
    ),
    _param("task", "query", "the task name", {"type": "string", "maxLength": 255}),
    _param("queue", "query", "the queue option (filtered by a bounded scan)", {"type": "string"}),
    _param("error", "query", "1: only jobs with a last error", {"enum": ["0", "1"]}),
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
            "get": _op("List jobs, earliest due first (keyset paged)", (200, "JobPage"), (), _LIST)
        },
        "/jobs/{job_id}": {
            "get": _op("One job with its timeline", (200, "JobDetail"), (404,), job)
        },
        "/jobs/{job_id}/cancel": {
            "post": _op("Cancel a scheduled job", (200, "Cancelled"), _CHANGE, job)
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
            "delete": _op(
                "Remove a recurring job (its firings stay)", (200, "Removed"), (403, 404), rec
            ),
        },
        "/recurring/{recurring_id}/pause": {
            "post": _op("Stop firing until resumed", (200, "Recurring"), (403, 404), rec)
        },
        "/recurring/{recurring_id}/resume": {
            "post": _op("Fire again from the next tick", (200, "Recurring"), (403, 404), rec)
        },
        "/recurring/{recurring_id}/trigger": {
            "post": _op("Fire once now, outside the schedule", (200, "Triggered"), _CHANGE, rec)
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
                "Jobs, recurring jobs and status. Auth: the dashboard's basic auth or bearer "
                f"token. A state change not made with a bearer token needs the {CSRF_HEADER} "
                'header (GET /csrf-token). Errors: {"error": {"code", "message"}}.'
            ),
        },
        "servers": [{"url": server}],
        "paths": paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}, {}],
    }
