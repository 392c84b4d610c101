"""The JSON shapes of stored rows and of the answers to actions: one home for each, shared by the
command line's ``--json`` output and the dashboard's HTTP API (``/api/v1/``), so a script reading
either sees the same keys.

Every stored row is shown, and a row that cannot be read is flagged. A store may hold a row this
version cannot turn into a ``Job`` or ``RecurringJob``: a due time outside the documented range
(``1e20``, ``-1e12``), NaN, a payload that is not JSON, a recurring schedule that no longer
parses. Listings exist to find exactly such rows, so one of them must never take a listing down:
each field is shown by the model (``Job``/``RecurringJob``) when it can, else field by field, and
what is wrong is said in the row's ``problem``. Every view is strict JSON (no NaN, no infinity).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from parallel_scheduler.client import Client
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.jobs import Job, decode_payload
from parallel_scheduler.pausing import pause_view
from parallel_scheduler.process.health import Problem, health_problems
from parallel_scheduler.process.status_report import status_report
from parallel_scheduler.ranges import instant
from parallel_scheduler.recurring.jobs import RecurringJob
from parallel_scheduler.recurring.limits import runs_of
from parallel_scheduler.recurring.overlap_policy import DEFAULT_OVERLAP_TIMEOUT
from parallel_scheduler.timeline import job_timeline, outcome_view
from storage_adapters import (
    InvalidIdentifierError,
    JobRecord,
    JobState,
    OutcomeEvent,
    OutcomeStore,
    RecurringRecord,
    validate_job_id,
)
from storage_adapters.checks.outcomes import MAX_OUTCOME_IDS

__all__ = [
    "cancel_view",
    "job_view",
    "pause_view",
    "paused_view",
    "recurring_view",
    "removed_view",
    "reschedule_view",
    "resumed_view",
    "schedule_view",
    "status_view",
    "triggered_view",
    "with_outcomes",
]


def _seconds(value: object) -> object:
    """A number for JSON: NaN and infinities are not JSON, so they become their text."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _payload(payload: object, problems: list[str]) -> tuple[Any, Any, Any]:
    try:
        return decode_payload(payload)  # type: ignore[arg-type]
    except Exception as exc:
        problems.append(f"payload cannot be decoded ({type(exc).__name__}: {exc})")
        return None, None, None


def _state(state: object) -> str:
    return state.value if isinstance(state, JobState) else str(state)


def _modelled(to_dict: Callable[[], dict[str, Any]]) -> dict[str, Any] | str:
    """The model's own view of a row if it can make one that is strict JSON; else why not."""
    try:
        view = to_dict()
        json.dumps(view, allow_nan=False)
    except Exception as exc:  # any failure of one row's conversion: shown field by field instead
        return f"{type(exc).__name__}: {exc}"
    view.setdefault("problem", None)
    return view


def _read_fields(
    record: JobRecord | RecurringRecord, instants: Sequence[str], problems: list[str]
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Field by field, what every stored row shows: its id, task and call (the keys that open
    ``StoredCall.to_dict``'s view), and the named instants, noting in ``problems`` what is wrong."""
    times = {name: instant(name, getattr(record, name), problems) for name in instants}
    args, kwargs, options = _payload(record.payload, problems)
    call = {
        "id": str(record.id),
        "task": str(record.task),
        "args": args,
        "kwargs": kwargs,
        "options": options,
    }
    return call, times


def job_view(record: JobRecord) -> dict[str, Any]:
    """A stored job as a JSON-ready dict (``Job.to_dict``'s keys, with ``problem``)."""
    view = _modelled(lambda: Job.from_record(record).to_dict())
    if isinstance(view, dict):
        return view
    problems: list[str] = []
    call, times = _read_fields(record, ("due_at", "created_at", "updated_at"), problems)
    return {
        **call,
        "due_at": times["due_at"],
        "state": _state(record.state),
        "queue": record.queue if isinstance(record.queue, str) else None,
        "unique_key": getattr(record, "unique_key", None),
        "attempts": _seconds(record.attempts),
        "created_at": times["created_at"],
        "updated_at": times["updated_at"],
        "last_error": record.last_error,
        "problem": "; ".join(problems) or f"cannot be read as a job ({view})",
    }


def _schedule_fields(text: object, problems: list[str]) -> dict[str, Any]:
    try:
        raw = json.loads(text)  # type: ignore[arg-type]
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except Exception as exc:
        problems.append(f"schedule cannot be decoded ({type(exc).__name__}: {exc})")
        names = ("cron", "every", "timezone", "misfire_policy", "jitter", "catch_up_window")
        added = ("max_runs", "exclude", "overlap", "overlap_timeout", "pause_after_failures")
        return dict.fromkeys((*names, *added))
    return {
        "cron": raw.get("cron") or None,
        "every": _seconds(raw.get("every")),
        "timezone": raw.get("timezone"),
        "misfire_policy": raw.get("misfire_policy"),
        "jitter": _seconds(raw.get("jitter", 0.0)),
        "catch_up_window": _seconds(raw.get("catch_up_window")),
        "exclude": raw.get("exclude", []),
        "max_runs": _seconds(raw.get("max_runs")),
        "overlap": raw.get("overlap", "allow"),
        "overlap_timeout": _seconds(raw.get("overlap_timeout", DEFAULT_OVERLAP_TIMEOUT)),
        "pause_after_failures": _seconds(raw.get("pause_after_failures")),
    }


def recurring_view(record: RecurringRecord) -> dict[str, Any]:
    """A stored recurring job as a JSON-ready dict (``RecurringJob.to_dict``'s keys, with
    ``problem``)."""
    view = _modelled(lambda: RecurringJob.from_record(record).to_dict())
    if isinstance(view, dict):
        return view
    problems: list[str] = []
    call, times = _read_fields(record, ("next_run_at", "last_run_at", "paused_at"), problems)
    schedule = _schedule_fields(record.schedule, problems)
    return {
        **call,
        **schedule,
        "runs": runs_of(record.history) if isinstance(record.history, str) else 0,
        "enabled": record.enabled,
        "next_run_at": times["next_run_at"],
        "last_run_at": times["last_run_at"],
        "pause_note": record.pause_note,
        "paused_by": record.paused_by,
        "paused_at": times["paused_at"],
        "problem": "; ".join(problems) or f"cannot be read as a recurring job ({view})",
    }


def schedule_view(
    job_id: str, created: bool, due_at: str, replaced: bool | None = None
) -> dict[str, Any]:
    """The answer to scheduling one job: its id, whether this call created it, its due time; for
    a unique job (``replaced`` given) also whether it replaced the key's holder, and ``outcome``
    (``created``, ``kept`` or ``replaced``)."""
    view: dict[str, Any] = {"id": job_id, "created": created, "due_at": due_at}
    if replaced is not None:
        view["replaced"] = replaced
        view["outcome"] = "created" if created else "replaced" if replaced else "kept"
    return view


def cancel_view(job_id: str, cancelled: bool) -> dict[str, Any]:
    """The answer to cancelling one job: whether it was scheduled and is now cancelled."""
    return {"id": job_id, "cancelled": cancelled}


def reschedule_view(job_id: str, rescheduled: bool, record: JobRecord) -> dict[str, Any]:
    """The answer to moving one job's due time: whether it moved, and its stored due time now."""
    return {"id": job_id, "rescheduled": rescheduled, "due_at": job_view(record)["due_at"]}


def triggered_view(recurring_id: str, job_id: str) -> dict[str, Any]:
    """The answer to triggering a recurring job: the id of the firing it created."""
    return {"id": recurring_id, "job_id": job_id}


def removed_view(recurring_id: str, removed: bool) -> dict[str, Any]:
    """The answer to removing a recurring job: whether it existed (its firings stay)."""
    return {"id": recurring_id, "removed": removed}


def paused_view(kind: str, name: str, held: int) -> dict[str, Any]:
    """The answer to pausing a queue or task: how many scheduled jobs it held now."""
    return {"kind": kind, "name": name, "held": held}


def resumed_view(kind: str, name: str, released: int) -> dict[str, Any]:
    """The answer to resuming one: how many held jobs are scheduled again (0: it was not
    paused, or held nothing that no other pause holds)."""
    return {"kind": kind, "name": name, "released": released}


def judged_status(
    client: Client, max_lag: float | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """The status report (``process/status_report.py``) with its health ``problems`` (a list of
    ``{"kind", "message"}``, judged by ``process/health.py`` against ``max_lag``, by default the
    ``lag_alert`` setting), and those problems to print."""
    settings = client.settings
    report = status_report(client)
    lag = settings.lag_alert if max_lag is None else max_lag
    problems = health_problems(report, max_lag=lag, settings=settings)
    report["problems"] = [problem.as_dict() for problem in problems]
    return report, problems


def status_view(client: Client, max_lag: float | None = None) -> dict[str, Any]:
    """``parallel-scheduler status --json`` and ``GET /api/v1/status``: ``judged_status``'s
    report."""
    return judged_status(client, max_lag)[0]


def job_detail_view(record: JobRecord, events: list[OutcomeEvent]) -> dict[str, Any]:
    """One job with its timeline (created, claimed, sent, then what the workers recorded):
    ``parallel-scheduler show --json`` and ``GET /api/v1/jobs/<id>``."""
    return {**job_view(record), "timeline": job_timeline(record, events)}


def _firing_ids(views: Sequence[dict[str, Any]]) -> list[str]:
    """The distinct, valid job ids of the views' recent firings (a history entry written by hand
    may name no job, or an id no store accepts: it simply has no outcome)."""
    ids: dict[str, None] = {}
    for view in views:
        for firing in view.get("recent_firings") or ():
            job_id = firing.get("job_id")
            if isinstance(job_id, str) and job_id not in ids:
                try:
                    ids[validate_job_id(job_id)] = None
                except InvalidIdentifierError:
                    continue
    return list(ids)


def with_outcomes(client: Client, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``views`` (``recurring_view``'s) with what became of their firings: ``firing_outcomes``
    (the latest recorded state of each recent firing that has one, by job id) and
    ``last_outcome`` (``outcome_view`` of the newest firing's latest outcome, or ``None``: no
    firing yet, none recorded yet, or a store that keeps no outcomes). One storage read per
    ``MAX_OUTCOME_IDS`` firings, never one per row: for the HTTP API's answers and the command
    line's alike."""
    store = client.storage
    ids = _firing_ids(views)
    latest: dict[str, OutcomeEvent] = {}
    if isinstance(store, OutcomeStore):
        for start in range(0, len(ids), MAX_OUTCOME_IDS):
            batch = ids[start : start + MAX_OUTCOME_IDS]
            latest.update(
                call_storage(partial(store.latest_outcomes, batch), give_up_after=client.retry_for)
            )
    for view in views:
        firings = view.get("recent_firings")
        firings = firings if isinstance(firings, list) else []
        shown = [firing.get("job_id") for firing in firings]
        view["firing_outcomes"] = {
            job_id: latest[job_id].state.value for job_id in shown if job_id in latest
        }
        newest = latest.get(shown[0]) if shown and shown[0] is not None else None
        view["last_outcome"] = None if newest is None else outcome_view(newest)
    return views
