"""The Outcomes page: what the Celery workers did with the jobs released from storage, as the
workers' plugin recorded it (``OutcomeStore``): the counts per task, the newest failures first,
then the newest final outcomes of every kind, keyset-paged (``before=<at>:<job id>``), of one
outcome or one task when asked. A store without outcomes (no worker records them) shows empty
tables and says why."""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template, request, url_for

from parallel_scheduler.dashboard.context import dashboard
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    cursor_text,
    parse_cursor,
    parse_int,
    parse_text,
)
from parallel_scheduler.engine.retrying import call_storage
from storage_adapters import OutcomeQuery, OutcomeState, OutcomeStore
from storage_adapters.checks.outcomes import FINAL_OUTCOMES

__all__ = ["FAILURES_SHOWN", "register"]

#: The newest failures shown above the listing.
FAILURES_SHOWN = 20
PAGE_SIZE = 50


def _query(before: tuple[float, str] | None) -> OutcomeQuery:
    state_text = parse_text(request.args, "state", 20)
    state = None
    if state_text:
        try:
            state = OutcomeState(state_text)
        except ValueError:
            raise BadInput(f"state {state_text!r} is not an outcome") from None
        if not state.is_final:
            raise BadInput(f"state {state_text!r} is not a final outcome")
    task = parse_text(request.args, "task", 255) or None
    return OutcomeQuery(state=state, task=task, before=before)


def outcomes() -> Any:
    board = dashboard()
    store = board.client.storage
    raw_before = parse_text(request.args, "before", 1100)
    before = parse_cursor({"after": raw_before}) if raw_before else None
    query = _query(before)
    limit = parse_int(request.args, "limit", PAGE_SIZE, 1, 500)
    counts: dict[str, dict[OutcomeState, int]] = {}
    failures: list[Any] = []
    rows: list[Any] = []
    if isinstance(store, OutcomeStore):

        def read() -> None:
            counts.update(store.outcome_counts())
            if before is None:
                failed = OutcomeQuery(state=OutcomeState.FAILED, task=query.task)
                failures[:] = store.outcomes_page(failed, FAILURES_SHOWN)
            rows[:] = store.outcomes_page(query, limit)

        call_storage(read, give_up_after=board.client.retry_for)
    args: dict[str, Any] = {
        name: value
        for name, value in (("state", query.state and query.state.value), ("task", query.task))
        if value
    }
    if limit != PAGE_SIZE:
        args["limit"] = str(limit)
    next_url = None
    if len(rows) == limit:
        next_url = url_for("outcomes", **args, before=cursor_text(rows[-1].at, rows[-1].job_id))
    return render_template(
        "outcomes.html",
        counts=counts,
        finals=FINAL_OUTCOMES,
        failures=failures,
        rows=rows,
        query=query,
        next_url=next_url,
        first_url=url_for("outcomes", **args) if before is not None else None,
        recorded=isinstance(store, OutcomeStore),
    )


def register(app: Flask) -> None:
    app.add_url_rule("/outcomes", "outcomes", outcomes)
