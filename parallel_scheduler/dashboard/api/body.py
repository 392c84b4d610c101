"""Reading what a script sends: the JSON body and the ids in a path, each value checked here so
that a bad one is a 400 naming the field, never a 500 (``BadInput``, shown by the app as JSON).

A body is parsed whatever its declared content type, as strict JSON (no ``NaN``, no
``Infinity``); it must be an object, and an unknown field is refused by name (a typo in a field
name must not be ignored in silence).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from datetime import datetime, timezone
from typing import Any

from flask import request

from parallel_scheduler.dashboard.inputs import BadInput, parse_job_id
from parallel_scheduler.ranges import in_range

__all__ = [
    "json_body",
    "optional_instant",
    "optional_number",
    "path_id",
    "typed",
]

#: Each kind of value a field may be: the Python types JSON gives it, and its name in messages.
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "text": ((str,), "a string"),
    "list": ((list,), "a list"),
    "object": ((dict,), "an object"),
    "boolean": ((bool,), "true or false"),
    "integer": ((int,), "an integer"),
    "number": ((int, float), "a number"),
}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_body(allowed: Collection[str]) -> dict[str, Any]:
    """The request's body: a JSON object whose fields are all in ``allowed`` (``{}`` when there
    is no body)."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"the body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise BadInput(f"unknown field(s) {', '.join(map(repr, unknown))[:300]}; known: {known}")
    return body


def typed(body: Mapping[str, Any], field: str, kind: str, default: Any = None) -> Any:
    """``body[field]`` if it is of ``kind`` (``text``, ``list``, ``object``, ``boolean``,
    ``integer``, ``number``), ``default`` when absent or null."""
    value = body.get(field)
    if value is None:
        return default
    types, name = _KINDS[kind]
    if not isinstance(value, types) or (isinstance(value, bool) and kind != "boolean"):
        raise BadInput(f"{field} must be {name}, not {type(value).__name__}")
    if isinstance(value, int) and kind != "boolean" and abs(value) > 2**63:
        raise BadInput(f"{field} is out of range")
    return value


def optional_number(body: Mapping[str, Any], field: str) -> float | None:
    """A finite number of seconds, or ``None``."""
    value = typed(body, field, "number")
    if value is None:
        return None
    seconds = float(value)
    if not math.isfinite(seconds):
        raise BadInput(f"{field} must be a finite number")
    return seconds


def optional_instant(body: Mapping[str, Any], field: str) -> datetime | None:
    """An ISO 8601 date-time (UTC when it has no offset) inside the valid range, or ``None``."""
    text = typed(body, field, "text")
    if text is None:
        return None
    if len(text) > 64:
        raise BadInput(f"{field} is {len(text)} characters; a date-time has at most 64")
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"{field} {text!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        inside = in_range(moment.timestamp())
    except (OverflowError, ValueError, OSError):
        inside = False
    if not inside:
        raise BadInput(f"{field} {text!r} is outside the valid range (1970-01-01 .. 9999-01-01)")
    return moment


def path_id(value: str, field: str = "id") -> str:
    """A job or recurring job id taken from the path, validated as every id is."""
    return parse_job_id({field: value}, field)
