"""``/api/v1/outcomes``: what the Celery workers did with the released jobs, as the workers'
plugin recorded it (``OutcomeStore``), in the shapes of ``parallel_scheduler.timeline`` (the
Outcomes page's and ``show --json``'s): the newest final outcomes first, keyset paged
(``before=``), of one final outcome or one task when asked; and the counts per task. A store
without the outcomes family answers empty lists with ``"recorded": false``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from parallel_scheduler.dashboard.api.guard import reply
from parallel_scheduler.dashboard.context import dashboard
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    cursor_text,
    parse_cursor,
    parse_int,
    parse_text,
)
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.timeline import outcome_view
from storage_adapters import OutcomeEvent, OutcomeQuery, OutcomeState, OutcomeStore
from storage_adapters.checks.outcomes import FINAL_OUTCOMES
from storage_adapters.records import MAX_TASK_NAME_LENGTH

__all__ = ["PAGE_SIZE", "register"]

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def _query() -> OutcomeQuery:
    text = parse_text(request.args, "state", 20)
    state = None
    if text is not None:
        try:
            state = OutcomeState(text)
        except ValueError:
            state = None
        if state is None or not state.is_final:
            known = ", ".join(s.value for s in FINAL_OUTCOMES)
            raise BadInput(f"state {text!r} is not a final outcome; known: {known}")
    raw_before = parse_text(request.args, "before", 1100)
    before = parse_cursor({"after": raw_before}) if raw_before else None
    task = parse_text(request.args, "task", MAX_TASK_NAME_LENGTH)
    return OutcomeQuery(state=state, task=task, before=before)


def list_outcomes() -> Response:
    query = _query()
    limit = parse_int(request.args, "limit", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    client = dashboard().client
    store = client.storage
    rows: list[OutcomeEvent] = []
    if isinstance(store, OutcomeStore):
        rows = call_storage(
            lambda: store.outcomes_page(query, limit), give_up_after=client.retry_for
        )
    last = rows[-1] if len(rows) == limit else None
    return reply(
        {
            "outcomes": [outcome_view(event) for event in rows],
            "next": None if last is None else cursor_text(last.at, last.job_id),
            "recorded": isinstance(store, OutcomeStore),
        }
    )


def outcome_counts() -> Response:
    client = dashboard().client
    store = client.storage
    counts: dict[str, dict[Any, int]] = {}
    if isinstance(store, OutcomeStore):
        counts = call_storage(store.outcome_counts, give_up_after=client.retry_for)
    shown = {
        task: {getattr(state, "value", str(state)): n for state, n in per_state.items()}
        for task, per_state in counts.items()
    }
    return reply({"counts": shown, "recorded": isinstance(store, OutcomeStore)})


def register(api: Blueprint) -> None:
    api.add_url_rule("/outcomes", "outcomes", list_outcomes)
    api.add_url_rule("/outcomes/counts", "outcome_counts", outcome_counts)
