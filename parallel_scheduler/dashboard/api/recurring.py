"""``/api/v1/recurring``: list, get, create, update, edit, pause, resume, trigger, backfill and
remove recurring jobs, all through ``client.recurring`` (its validation, its error messages: an
invalid cron, zone or interval is a 400 naming it, and nothing is written).

A create or ``PUT`` body is the whole recurring job: a field left out takes
``RecurringJobs.save``'s default, as on the command line. A ``PATCH`` body names only what
changes: every field left out keeps its stored value, ``options`` are merged key by key (an
option set to ``null`` is removed), and the result is saved whole with ``mode="update"``.
``max_runs`` set to ``null`` removes the limit; the job's count of runs is kept either way.
``overlap``, ``overlap_timeout`` and ``pause_after_failures`` (``null`` in a ``PATCH``: never
pause) are checked by the client, in the words of every entry point. A backfill takes
``overlap`` ``allow`` or ``skip``; ``buffer_one`` waits for firings to finish, which would hold
the request open, so it is refused with a 400 naming the command line.

Every recurring job answered carries its firings' outcomes (``views.with_outcomes``):
``firing_outcomes`` (the state of each recent firing's latest recorded outcome, by job id) and
``last_outcome`` (the newest firing's latest outcome, whole), read in batches, never one storage
read per row. The command
line's ``recurring list --json`` and ``recurring show --json`` give the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, cast

from flask import Blueprint, Response, g, request

from parallel_scheduler.dashboard.api.body import (
    json_body,
    optional_instant,
    optional_number,
    path_id,
    typed,
)
from parallel_scheduler.dashboard.api.guard import ApiError, found, read_storage, reply
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.inputs import BadInput, parse_backfill_overlap, parse_int
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError, ParallelSchedulerError
from parallel_scheduler.job_checks import ROUTING_OPTIONS
from parallel_scheduler.jobs import utc_datetime
from parallel_scheduler.pausing import pauser
from parallel_scheduler.recurring.overlap_policy import DEFAULT_OVERLAP_TIMEOUT
from parallel_scheduler.recurring.triggers import MisfirePolicy
from parallel_scheduler.views import recurring_view, removed_view, triggered_view, with_outcomes
from storage_adapters import (
    RecurringRecord,
    SaveMode,
)
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH, check_pause_note

__all__ = ["MISFIRE_POLICIES", "SAVE_FIELDS", "register"]

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
MISFIRE_POLICIES = ("skip", "run_once", "run_all")
#: The fields of a create or update body (a create also names the ``id``).
SAVE_FIELDS = (
    "task",
    "cron",
    "every",
    "args",
    "kwargs",
    "timezone",
    "start",
    "end",
    "misfire_policy",
    "misfire_cap",
    "misfire_grace",
    "jitter",
    "catch_up_window",
    "max_runs",
    "overlap",
    "overlap_timeout",
    "pause_after_failures",
    "exclude",
    "enabled",
    "options",
)


def _answer(record: RecurringRecord) -> dict[str, Any]:
    """One recurring job as every answer shows it: its view with its firings' outcomes."""
    return with_outcomes(dashboard().client, [recurring_view(record)])[0]


def _record(recurring_id: str) -> RecurringRecord | None:
    storage = dashboard().client.storage
    return read_storage(lambda: storage.get_recurring(recurring_id))


def _existing(recurring_id: str) -> RecurringRecord:
    return found(_record(recurring_id), f"recurring job with id {recurring_id!r}")


def list_recurring() -> Response:
    limit = parse_int(request.args, "limit", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    offset = parse_int(request.args, "offset", 0, 0, 10_000_000)
    client = dashboard().client
    records: list[RecurringRecord] = call_storage(
        lambda: client.storage.list_recurring(limit + 1, offset), give_up_after=client.retry_for
    )
    more = len(records) > limit
    return reply(
        {
            "recurring": with_outcomes(
                dashboard().client, [recurring_view(record) for record in records[:limit]]
            ),
            "next_offset": offset + limit if more else None,
        }
    )


def get_recurring(recurring_id: str) -> Response:
    return reply(_answer(_existing(path_id(recurring_id))))


def _options(body: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = typed(body, "options", "object", {})
    unknown = sorted(set(options) - ROUTING_OPTIONS)
    if unknown:
        shown = ", ".join(map(repr, unknown))[:300]
        raise BadInput(f"options: unknown option(s) {shown}; known: {sorted(ROUTING_OPTIONS)}")
    return options


def _save(recurring_id: str, body: dict[str, Any], mode: SaveMode) -> RecurringRecord:
    task = typed(body, "task", "text")
    if task is None:
        raise BadInput("task: the task name is required")
    policy = typed(body, "misfire_policy", "text", "run_once")
    if policy not in MISFIRE_POLICIES:
        raise BadInput(f"misfire_policy {policy!r} is not one of {', '.join(MISFIRE_POLICIES)}")
    grace = optional_number(body, "misfire_grace")
    dashboard().client.recurring.save(
        recurring_id,
        task,
        typed(body, "cron", "text", ""),
        every=optional_number(body, "every"),
        args=typed(body, "args", "list", []),
        kwargs=typed(body, "kwargs", "object", {}),
        timezone=typed(body, "timezone", "text", "UTC"),
        start=optional_instant(body, "start"),
        end=optional_instant(body, "end"),
        misfire_policy=cast(MisfirePolicy, policy),
        misfire_cap=typed(body, "misfire_cap", "integer", 100),
        misfire_grace=60.0 if grace is None else grace,
        jitter=optional_number(body, "jitter"),
        catch_up_window=optional_number(body, "catch_up_window"),
        max_runs=body.get("max_runs"),  # checked by the client, in its words
        overlap=body.get("overlap", "allow"),  # these two as well
        overlap_timeout=body.get("overlap_timeout", DEFAULT_OVERLAP_TIMEOUT),
        pause_after_failures=body.get("pause_after_failures"),
        exclude=body.get("exclude", []),  # calendar names: checked by the client too
        enabled=typed(body, "enabled", "boolean", True),
        mode=mode,
        **_options(body),
    )
    return _existing(recurring_id)


def create_recurring() -> Response:
    body = json_body(("id", *SAVE_FIELDS))
    recurring_id = typed(body, "id", "text")
    if recurring_id is None:
        raise BadInput("id: the recurring job's id is required")
    recurring_id = path_id(recurring_id)
    if _record(recurring_id) is not None:
        raise ApiError(409, "conflict", f"recurring job {recurring_id!r} exists already")
    saved = _save(recurring_id, body, "create")
    audit("api_recurring_create", [recurring_id])
    return reply(_answer(saved), 201)


def update_recurring(recurring_id: str) -> Response:
    recurring_id = path_id(recurring_id)
    body = json_body(SAVE_FIELDS)
    _existing(recurring_id)
    saved = _save(recurring_id, body, "update")
    audit("api_recurring_update", [recurring_id])
    return reply(_answer(saved))


def _given(body: dict[str, Any], field: str, kind: str) -> Any:
    """A ``PATCH`` field: its value if given (checked as ``typed`` checks it), ``None`` if left
    out. ``null`` keeps nothing and changes nothing, so it is refused by name."""
    if field in body and body[field] is None:
        raise BadInput(f"{field}: null is not a value; leave the field out to keep it")
    return typed(body, field, kind)


def _kept(given: Any, stored: Any) -> Any:
    """The value given, or the stored one when the field was left out (``None``)."""
    return stored if given is None else given


def _given_number(body: dict[str, Any], field: str) -> float | None:
    """A ``PATCH`` number of seconds (finite), ``None`` if left out; ``null`` is refused."""
    _given(body, field, "number")
    return optional_number(body, field)


def _merged_options(stored: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The stored send options with the body's ``options`` merged in: an option given replaces
    the stored one, an option given as ``null`` is removed, the others are kept."""
    patch: dict[str, Any] = _given(body, "options", "object") or {}
    unknown = sorted(set(patch) - ROUTING_OPTIONS)
    if unknown:
        shown = ", ".join(map(repr, unknown))[:300]
        raise BadInput(f"options: unknown option(s) {shown}; known: {sorted(ROUTING_OPTIONS)}")
    merged = {**stored, **patch}
    return {name: value for name, value in merged.items() if value is not None}


def _window(body: dict[str, Any], stored: float | None) -> float | None:
    """``catch_up_window``: the one given (``null`` removes the window), else the stored one."""
    if "catch_up_window" in body:
        return optional_number(body, "catch_up_window")
    return stored


def _bound(body: dict[str, Any], field: str, stored: float | None) -> datetime | None:
    """``start`` or ``end``: the one given (``null`` removes the bound), else the stored one."""
    if field in body:
        return optional_instant(body, field)
    return None if stored is None else utc_datetime(stored)


def edit_recurring(recurring_id: str) -> Response:
    """``PATCH``: change only the fields given; the rest are saved as they are stored."""
    recurring_id = path_id(recurring_id)
    body = json_body(SAVE_FIELDS)
    jobs = dashboard().client.recurring
    stored = found(jobs.get(recurring_id), f"recurring job with id {recurring_id!r}")
    if stored.problem is not None:
        raise ApiError(
            409,
            "conflict",
            f"recurring job {recurring_id!r} cannot be read whole ({stored.problem[:300]}), so "
            "no field of it can be kept: replace it whole with PUT",
        )
    schedule = stored.schedule
    cron, every = _given(body, "cron", "text"), _given_number(body, "every")
    if cron is None and every is None:  # the schedule is kept
        cron, every = schedule.cron, schedule.every
    # else the one given replaces the other: a cron ends an interval, an interval a cron
    policy = _kept(_given(body, "misfire_policy", "text"), schedule.misfire_policy)
    if policy not in MISFIRE_POLICIES:
        raise BadInput(f"misfire_policy {policy!r} is not one of {', '.join(MISFIRE_POLICIES)}")
    cap, grace = _given(body, "misfire_cap", "integer"), _given_number(body, "misfire_grace")
    enabled = _given(body, "enabled", "boolean")
    args, kwargs = _given(body, "args", "list"), _given(body, "kwargs", "object")
    jobs.save(
        recurring_id,
        _kept(_given(body, "task", "text"), stored.task),
        cron or "",
        every=every,
        args=_kept(args, stored.args),
        kwargs=_kept(kwargs, stored.kwargs),
        timezone=_kept(_given(body, "timezone", "text"), schedule.timezone),
        start=_bound(body, "start", schedule.start_at),
        end=_bound(body, "end", schedule.end_at),
        misfire_policy=cast(MisfirePolicy, policy),
        misfire_cap=_kept(cap, schedule.misfire_cap),
        misfire_grace=_kept(grace, schedule.misfire_grace),
        jitter=_kept(_given_number(body, "jitter"), schedule.jitter),
        catch_up_window=_window(body, schedule.catch_up_window),
        max_runs=body.get("max_runs", schedule.max_runs),  # left out: kept; null: no limit
        overlap=body.get("overlap", schedule.overlap),  # left out: kept
        overlap_timeout=body.get("overlap_timeout", schedule.overlap_timeout),
        # left out: kept; null: never pause
        pause_after_failures=body.get("pause_after_failures", schedule.pause_after_failures),
        exclude=body.get("exclude", schedule.exclude),  # left out: kept; []: none
        enabled=_kept(enabled, stored.enabled),
        mode="update",
        **_merged_options(stored.options, body),
    )
    changed = ",".join(sorted(body)) or "nothing"
    audit("api_recurring_edit", [recurring_id], f"fields={changed}")
    return reply(_answer(_existing(recurring_id)))


def _act(
    recurring_id: str, action: str, act: Callable[[str], Any], fields: tuple[str, ...] = ()
) -> Any:
    """``act`` on an existing recurring job: 404 if it is missing, before or during the act; a
    body may hold only ``fields``."""
    recurring_id = path_id(recurring_id)
    json_body(fields)
    _existing(recurring_id)
    try:
        result = act(recurring_id)
    except InvalidJobError:  # removed between the check and the act
        _existing(recurring_id)
        raise
    audit(f"api_recurring_{action}", [recurring_id], f"result={result}")
    return result


def pause_recurring(recurring_id: str) -> Response:
    """``POST`` with an optional ``{"note": ...}``: kept with the pause, and who paused it is the
    caller as the API authenticated it; a bad note is a 400 in storage's words, nothing written."""
    body = json_body(("note",))
    who = str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH]
    note, by = check_pause_note(body.get("note", ""), pauser(who or None))
    paused = partial(dashboard().client.recurring.pause, note=note, by=by)
    _act(recurring_id, "pause", paused, ("note",))
    return reply(_answer(_existing(path_id(recurring_id))))


def resume_recurring(recurring_id: str) -> Response:
    _act(recurring_id, "resume", dashboard().client.recurring.resume)
    return reply(_answer(_existing(path_id(recurring_id))))


def trigger_recurring(recurring_id: str) -> Response:
    try:
        job_id = _act(recurring_id, "trigger", dashboard().client.recurring.trigger)
    except ParallelSchedulerError as exc:
        if type(exc) is not ParallelSchedulerError:  # a subclass: bad input, storage down
            raise
        # the base class itself: the job kept changing under every attempt to trigger it
        raise ApiError(409, "conflict", str(exc)) from None
    return reply(triggered_view(path_id(recurring_id), job_id))


def backfill_recurring(recurring_id: str) -> Response:
    """``POST {"from": ISO 8601, "to": ISO 8601, "overlap": "allow" | "skip"}``: every tick
    of the range fired once, or (``skip``) only its latest, none while a firing runs."""
    recurring_id = path_id(recurring_id)
    body = json_body(("from", "to", "overlap"))
    start, end = optional_instant(body, "from"), optional_instant(body, "to")
    if start is None or end is None:
        raise BadInput("from and to are required: the range to backfill (ISO 8601)")
    overlap = parse_backfill_overlap(body)
    record = _existing(recurring_id)
    done = dashboard().client.recurring.backfill(record.id, start, end, overlap)
    audit(
        "api_recurring_backfill",
        [recurring_id],
        f"from={start} to={end} overlap={overlap} {done.to_dict()}",
    )
    return reply({"id": recurring_id, **done.to_dict()})


def remove_recurring(recurring_id: str) -> Response:
    removed = _act(recurring_id, "remove", dashboard().client.recurring.remove)
    if not removed:
        raise ApiError(404, "not_found", f"no recurring job with id {recurring_id!r}")
    return reply(removed_view(path_id(recurring_id), True))


def register(api: Blueprint) -> None:
    api.add_url_rule("/recurring", "recurring", list_recurring)
    api.add_url_rule("/recurring", "recurring_create", create_recurring, methods=["POST"])
    api.add_url_rule("/recurring/<recurring_id>", "recurring_one", get_recurring)
    api.add_url_rule(
        "/recurring/<recurring_id>", "recurring_update", update_recurring, methods=["PUT"]
    )
    api.add_url_rule(
        "/recurring/<recurring_id>", "recurring_edit", edit_recurring, methods=["PATCH"]
    )
    api.add_url_rule(
        "/recurring/<recurring_id>", "recurring_remove", remove_recurring, methods=["DELETE"]
    )
    for name, view in (
        ("pause", pause_recurring),
        ("resume", resume_recurring),
        ("trigger", trigger_recurring),
        ("backfill", backfill_recurring),
    ):
        api.add_url_rule(
            f"/recurring/<recurring_id>/{name}", f"recurring_{name}", view, methods=["POST"]
        )
