"""Showing stored rows to people: every row is shown, and a row that cannot be read is flagged.

A store may hold a row this version cannot turn into a ``Job`` or ``RecurringJob``: a due time
outside the documented range (``1e20``, ``-1e12``), NaN, a payload that is not JSON, a recurring
schedule that no longer parses. ``list``, ``show``, ``status`` and ``recurring list`` exist to
find exactly such rows, so one of them must never take the whole command down: each field is
shown by the model (``Job``/``RecurringJob``) when it can, else field by field, and what is wrong
is said in the row's ``problem``.

Tables keep ids whole: on a terminal the id column folds instead of cutting, and when the output
is piped it is tab-separated text with nothing shortened, so an id copied into ``cancel`` works.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from parallel_scheduler.jobs import Job, decode_payload
from parallel_scheduler.ranges import instant
from parallel_scheduler.recurring.jobs import RecurringJob
from storage_adapters import JobRecord, JobState, RecurringRecord

__all__ = ["instant", "job_view", "print_listing", "print_table", "recurring_view"]


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
        return {"cron": None, "every": None, "timezone": None, "misfire_policy": None}
    return {
        "cron": raw.get("cron") or None,
        "every": _seconds(raw.get("every")),
        "timezone": raw.get("timezone"),
        "misfire_policy": raw.get("misfire_policy"),
    }


def recurring_view(record: RecurringRecord) -> dict[str, Any]:
    """A stored recurring job as a JSON-ready dict (``RecurringJob.to_dict``'s keys, with
    ``problem``)."""
    view = _modelled(lambda: RecurringJob.from_record(record).to_dict())
    if isinstance(view, dict):
        return view
    problems: list[str] = []
    call, times = _read_fields(record, ("next_run_at", "last_run_at"), problems)
    schedule = _schedule_fields(record.schedule, problems)
    return {
        **call,
        **schedule,
        "enabled": record.enabled,
        "next_run_at": times["next_run_at"],
        "last_run_at": times["last_run_at"],
        "problem": "; ".join(problems) or f"cannot be read as a recurring job ({view})",
    }


def _cell(value: object) -> str:
    """One line of text: a tab or newline inside a value would break a piped row apart."""
    text = "-" if value is None or value == "" else str(value)
    return " ".join(text.split()) if any(c in text for c in "\t\r\n") else text


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A table on a terminal; tab-separated lines, nothing shortened, when piped. A row whose
    last column (``problem``) says something is shown in yellow on a terminal."""
    cells = [[_cell(value) for value in row] for row in rows]
    if not sys.stdout.isatty():
        for line in [list(headers), *cells]:
            print("\t".join(line))
        return
    table = Table(*headers)
    for column in table.columns:
        column.overflow = "fold"  # wrap long ids onto more lines, never cut them with "…"
    for line in cells:
        flagged = headers[-1] == "problem" and line[-1] != "-"
        table.add_row(*line, style="yellow" if flagged else None)
    Console(markup=False, highlight=False).print(table)


def print_listing(
    views: Sequence[dict[str, Any]],
    columns: Mapping[str, str | Callable[[dict[str, Any]], object]],
    *,
    as_json: bool,
) -> None:
    """A listing of views: as JSON, or as a table of ``columns`` (header: the view's key, or a
    function of the view)."""
    if as_json:
        print(json.dumps(list(views), indent=2))
        return
    cells = [
        tuple(column(view) if callable(column) else view[column] for column in columns.values())
        for view in views
    ]
    print_table(tuple(columns), cells)
