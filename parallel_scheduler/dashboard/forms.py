"""What every action form shares: the confirmation tick box, JSON typed into a text area, and
the filters of the Jobs page read from a query string or a form (the bulk cancel posts the filters
it previewed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parallel_scheduler.dashboard.browse import JobFilter
from parallel_scheduler.dashboard.context import viewer_zone
from parallel_scheduler.dashboard.inputs import (
    BadInput,
    parse_id_prefix,
    parse_instant,
    parse_json,
    parse_search,
    parse_state,
    parse_task,
    parse_text,
)

__all__ = ["filter_args", "parse_json_field", "read_filter", "require_confirmation"]

FILTER_FIELDS = (
    "state",
    "id_prefix",
    "task",
    "task_prefix",
    "queue",
    "error",
    "error_contains",
    "due_from",
    "due_to",
)


def require_confirmation(form: Mapping[str, str]) -> None:
    if form.get("confirm") != "yes":
        raise BadInput("the action was not confirmed: tick the confirmation box and submit again")


def parse_json_field(
    values: Mapping[str, str], field: str, kind: type[list[Any]] | type[dict[str, Any]]
) -> Any:
    """A JSON array (``kind=list``) or object (``dict``) typed into a text area (``parse_json``:
    empty is empty), or ``BadInput`` naming the field; JSON nested deeper than Python can parse
    is refused by name too, never a 500."""
    try:
        return parse_json(values, field, kind)
    except RecursionError:
        raise BadInput(f"{field} is nested too deeply to be read") from None


def read_filter(values: Mapping[str, str], default_state: str | None = "scheduled") -> JobFilter:
    """The Jobs page filters (the API's job list takes the same). ``state`` defaults to
    scheduled (the indexed, common view); ``state=any`` lists every state. Each bad value is a
    ``BadInput`` naming its field."""
    shown = dict(values)
    if "state" not in shown and default_state is not None:
        shown["state"] = default_state
    zone = viewer_zone()
    error = parse_text(values, "error", 5)
    if error not in (None, "1", "0"):
        raise BadInput(f"error must be 1 or 0, not {error!r}")
    due_from = parse_instant(values, "due_from", zone)
    due_to = parse_instant(values, "due_to", zone)
    if due_from is not None and due_to is not None and due_from > due_to:
        raise BadInput("due_from is after due_to: the range is empty")
    return JobFilter(
        state=parse_state(shown),
        task=parse_task(values),
        queue=parse_text(values, "queue", 255),
        has_error=error == "1",
        due_from=due_from,
        due_to=due_to,
        id_prefix=parse_id_prefix(values),
        task_prefix=parse_task(values, "task_prefix"),
        error_contains=parse_search(values),
    )


def filter_args(values: Mapping[str, str]) -> dict[str, str]:
    """The filter fields as given (to carry into links and hidden form fields)."""
    return {name: values[name] for name in FILTER_FIELDS if values.get(name)}
