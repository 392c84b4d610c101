"""The component schemas of the HTTP API's OpenAPI document (``openapi.py``): the shapes
``parallel_scheduler.views`` makes (jobs, recurring jobs, the answers to actions) and
``process.status_report`` makes (status), each described once.

Rows the store holds that this version cannot read are still shown, flagged in ``problem``, so
the fields of a job or recurring job are typed loosely enough to carry a flagged row too.
"""

from __future__ import annotations

from typing import Any

from parallel_scheduler.rate_limits import RATE_PATTERN
from storage_adapters import JobState, OutcomeState, PauseKind
from storage_adapters.checks.pauses import MAX_PAUSE_NOTE_LENGTH
from storage_adapters.checks.rate_limits import MAX_RATE_COUNT

__all__ = ["SCHEMAS", "ref"]

_TEXT = {"type": "string"}
_MAYBE_TEXT = {"type": ["string", "null"]}
_ANY: dict[str, Any] = {}
_INSTANT = {"type": "string", "description": "ISO 8601; a flagged row's raw stored value"}
_MAYBE_INSTANT = {"type": ["string", "null"], "description": _INSTANT["description"]}
_KIND = {"enum": [kind.value for kind in PauseKind], "description": "what a pause or limit names"}
_LIMITED: dict[str, Any] = {
    "kind": _KIND,
    "name": _TEXT,
    "rate": {**_TEXT, "description": "count/unit: 100/s, 100/m, 100/h"},
    "count": {"type": "integer", "description": "releases per period"},
    "period": {"type": "number", "description": "the period, seconds"},
    "per_second": {"type": "number", "description": "count / period"},
    "burst": {"type": "integer", "description": "releases at once after a quiet spell"},
    "set_by": {**_TEXT, "description": "who set it (user@address, user@host)"},
}


def ref(name: str) -> dict[str, str]:
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
    "jitter": {
        "type": ["number", "null"],
        "minimum": 0,
        "description": "seconds each tick may fire late, by an offset of the id and the tick",
    },
    "catch_up_window": {
        "type": ["number", "null"],
        "minimum": 1,
        "description": "seconds: an older tick never fires, whatever the misfire policy",
    },
    "max_runs": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "end the job after this many scheduled firings; null: no limit",
    },
    "overlap": {
        "enum": ["allow", "skip", "buffer_one"],
        "description": "a tick while an earlier firing runs: fire it (allow, the default), "
        "skip it, or hold one and fire it when the earlier ones finish (buffer_one)",
    },
    "overlap_timeout": {
        "type": "number",
        "minimum": 1,
        "description": "seconds after its tick at which an unfinished firing counts as "
        "finished (default 3600)",
    },
    "pause_after_failures": {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": 20,
        "description": "pause the job after this many failed firings in a row; null: never",
    },
    "exclude": {
        "type": "array",
        "items": {"type": "string"},
        "description": "names of calendars of excluded dates (each must exist)",
    },
    "enabled": {"type": "boolean"},
    "options": {"type": "object", "description": "send options: queue, priority, headers, ..."},
}
#: A PATCH body: only what changes. A field left out keeps its stored value; start and end may be
#: null (the bound is removed); an option set to null is removed, the others are kept.
_EDIT: dict[str, Any] = {
    **_SAVE,
    "task": {**_TEXT, "description": "the task name each firing is sent as"},
    "cron": {**_TEXT, "description": "5 fields, or 6 with seconds first (replaces the interval)"},
    "every": {"type": "number", "description": "an interval in seconds (replaces the cron)"},
    "timezone": {**_TEXT, "description": "an IANA zone the cron is read in"},
    "options": {
        "type": "object",
        "description": "merged into the stored send options; an option set to null is removed",
    },
}
_FIRING = _object(
    ("job_id", "at", "trigger"),
    job_id={**_MAYBE_TEXT, "description": "the firing's job; null for an unreadable entry"},
    at=_MAYBE_TEXT,
    trigger={"type": "boolean", "description": "true: a manual trigger, not a scheduled tick"},
)
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
        queue={
            **_MAYBE_TEXT,
            "description": "the queue it is sent to, as stored; a pause of it holds the job "
            "(null: not known when stored)",
        },
        unique_key={
            **_MAYBE_TEXT,
            "description": "the key it holds for its task, one scheduled job per key "
            "(null: not a unique job)",
        },
        attempts={"type": ["integer", "string"]},
        created_at=_MAYBE_INSTANT,
        updated_at=_MAYBE_INSTANT,
        last_error=_MAYBE_TEXT,
    ),
    "JobDetail": {
        "allOf": [
            ref("Job"),
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
        outcomes={"type": "array", "items": ref("Outcome")},
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
        jobs={"type": "array", "items": ref("Job")},
        next={**_MAYBE_TEXT, "description": "the cursor of the next page (after=); null: last"},
        scanned={"type": "integer", "description": "rows read for this page"},
        bounded={"type": "boolean", "description": "the scan stopped at its bound"},
    ),
    "Recurring": _object(
        ("id", "task", "enabled", "problem", "firing_outcomes", "last_outcome"),
        **_CALL,
        cron=_MAYBE_TEXT,
        every={"type": ["number", "string", "null"]},
        timezone=_MAYBE_TEXT,
        misfire_policy=_MAYBE_TEXT,
        jitter={"type": ["number", "string", "null"], "description": "seconds; 0: none"},
        catch_up_window={"type": ["number", "string", "null"], "description": "seconds; or null"},
        max_runs={"type": ["integer", "null"], "description": "the limit of scheduled firings"},
        overlap={**_MAYBE_TEXT, "description": "allow, skip or buffer_one"},
        overlap_timeout={"type": ["number", "string", "null"], "description": "seconds"},
        pause_after_failures={"type": ["integer", "null"], "description": "null: never"},
        exclude={"type": ["array", "null"], "items": {"type": "string"}},
        runs={
            "type": "integer",
            "description": "scheduled firings so far (not triggers or backfills); the job has "
            "ended once it reaches max_runs",
        },
        enabled={"type": "boolean"},
        next_run_at=_MAYBE_INSTANT,
        last_run_at=_MAYBE_INSTANT,
        pause_note={**_MAYBE_TEXT, "description": "while paused: why; else null"},
        paused_by={**_MAYBE_TEXT, "description": "while paused: who (user@address, user@host)"},
        paused_at={**_MAYBE_INSTANT, "description": "while paused: since when; else null"},
        recent_firings={
            "type": "array",
            "description": "the kept firings, newest first",
            "items": _FIRING,
        },
        firing_outcomes={
            "type": "object",
            "description": "the latest recorded outcome of each recent firing that has one, "
            "by job id",
            "additionalProperties": {"enum": [state.value for state in OutcomeState]},
        },
        last_outcome={
            "anyOf": [ref("Outcome"), {"type": "null"}],
            "description": "the newest firing's latest recorded outcome; null: none yet",
        },
    ),
    "RecurringPage": _object(
        ("recurring", "next_offset"),
        recurring={"type": "array", "items": ref("Recurring")},
        next_offset={"type": ["integer", "null"], "description": "offset= of the next page"},
    ),
    "RecurringCreate": _object(("id", "task"), False, id=_TEXT, **_SAVE),
    "RecurringUpdate": _object(("task",), False, **_SAVE),
    "RecurringEdit": _object((), False, **_EDIT),
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
    "BackfillRange": _object(
        ("from", "to"),
        False,
        **{
            "from": {"type": "string", "format": "date-time", "description": "included"},
            "to": {"type": "string", "format": "date-time", "description": "included; past"},
            "overlap": {
                "enum": ["allow", "skip"],
                "description": "allow (default): every tick; skip: only the latest, none while "
                "a firing runs (buffer_one: the command line only)",
            },
        },
    ),
    "Backfilled": _object(
        ("id", "ticks", "created", "existing"),
        id=_TEXT,
        ticks={"type": "integer", "description": "ticks of the schedule in the range"},
        created={"type": "integer", "description": "firing jobs created now"},
        existing={"type": "integer", "description": "firing jobs that were there already"},
        skipped={"type": "integer", "description": "with overlap skip: ticks not fired"},
        excluded={
            "type": "integer",
            "description": "when the job names calendars: ticks on dates they exclude, not fired",
        },
    ),
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
        pauses={"type": "array", "description": "the pauses in force", "items": ref("Pause")},
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
    "Pause": _object(
        ("kind", "name", "note", "paused_by", "paused_at"),
        kind=_KIND,
        name=_TEXT,
        note=_TEXT,
        paused_by={**_TEXT, "description": "who paused it (user@address, user@host)"},
        paused_at=_MAYBE_INSTANT,
    ),
    "PauseList": _object(("pauses",), pauses={"type": "array", "items": ref("Pause")}),
    "Calendar": _object(
        ("name", "timezone", "ranges", "days", "set_by", "set_at"),
        name=_TEXT,
        timezone=_TEXT,
        ranges={
            "type": "array",
            "items": {"type": "array", "items": _TEXT},
            "description": "merged inclusive [first, last] ISO date ranges",
        },
        days={"type": "integer"},
        set_by=_TEXT,
        set_at=_MAYBE_INSTANT,
    ),
    "CalendarList": _object(("calendars",), calendars={"type": "array", "items": ref("Calendar")}),
    "CalendarPut": _object(
        (),
        False,
        dates={
            "type": "array",
            "items": {"type": ["string", "array"]},
            "description": "ISO dates, FIRST..LAST ranges or [first, last] pairs",
        },
        timezone={**_TEXT, "description": "IANA zone of the local dates (default UTC)"},
    ),
    "CalendarRemoved": _object(("name", "removed"), name=_TEXT, removed={"type": "boolean"}),
    "PauseCreate": _object(
        ("kind", "name"),
        False,
        kind=_KIND,
        name={**_TEXT, "minLength": 1, "maxLength": 255, "description": "a queue or task name"},
        note={
            **_TEXT,
            "maxLength": MAX_PAUSE_NOTE_LENGTH,
            "description": "why, for whoever sees the pause (pausing again replaces it)",
        },
    ),
    "RecurringPause": _object(
        (),
        False,
        note={
            **_TEXT,
            "maxLength": MAX_PAUSE_NOTE_LENGTH,
            "description": "why, for whoever sees the pause (pausing again replaces it)",
        },
    ),
    "Paused": _object(
        ("kind", "name", "held"),
        kind=_KIND,
        name=_TEXT,
        held={"type": "integer", "description": "scheduled jobs it held now"},
    ),
    "Limit": _object(
        (*_LIMITED, "set_at", "free_at"),
        **_LIMITED,
        set_at=_MAYBE_INSTANT,
        free_at={
            **_MAYBE_INSTANT,
            "description": "when the next job of it may go (ISO 8601); null or past: now",
        },
    ),
    "LimitList": _object(("limits",), limits={"type": "array", "items": ref("Limit")}),
    "LimitCreate": _object(
        ("kind", "name", "rate"),
        False,
        kind=_KIND,
        name={**_TEXT, "minLength": 1, "maxLength": 255, "description": "a queue or task name"},
        rate={
            **_TEXT,
            "pattern": RATE_PATTERN,
            "description": "count/unit: 100/s, 100/m or 100/h (also /sec, /min, /hour)",
        },
        burst={
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RATE_COUNT,
            "description": "releases at once after a quiet spell (default 1)",
        },
    ),
    "Limited": _object(tuple(_LIMITED), **_LIMITED),
    "Unlimited": _object(
        ("kind", "name", "removed"), kind=_KIND, name=_TEXT, removed={"const": True}
    ),
    "Resumed": _object(
        ("kind", "name", "released"),
        kind=_KIND,
        name=_TEXT,
        released={"type": "integer", "description": "held jobs scheduled again"},
    ),
}
