"""Reading what a person typed into a form or a URL: every value is checked here and a bad one
raises ``BadInput`` naming the field and the problem, which the app shows as a 400 page. No
query parameter or form field can reach storage unchecked, and none can cause a 500.
"""

from __future__ import annotations

import json
import math
import zoneinfo
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, TypeVar

from markupsafe import Markup

from parallel_scheduler.errors import ParallelSchedulerError
from parallel_scheduler.ranges import in_range
from parallel_scheduler.recurring import triggers
from storage_adapters import JobState
from storage_adapters.checks.browse import MAX_ERROR_SEARCH
from storage_adapters.errors import InvalidIdentifierError
from storage_adapters.records import MAX_JOB_ID_LENGTH, MAX_TASK_NAME_LENGTH, validate_job_id

__all__ = [
    "OTHER_ZONES",
    "BadInput",
    "cursor_text",
    "parse_cursor",
    "parse_id_prefix",
    "parse_instant",
    "parse_int",
    "parse_job_id",
    "parse_json",
    "parse_search",
    "parse_seconds",
    "parse_state",
    "parse_task",
    "parse_text",
    "parse_trail",
    "parse_zone",
    "zone_groups",
    "zone_names",
    "zone_options",
]

MAX_TEXT = 500

_N = TypeVar("_N", int, float)


class BadInput(ParallelSchedulerError):
    """A form field or query parameter that cannot be used; the message names it."""


def _clean(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{field} must be text")
    if len(value) > MAX_TEXT:
        raise BadInput(f"{field} is {len(value)} characters; the limit is {MAX_TEXT}")
    if any(not c.isprintable() for c in value):
        raise BadInput(f"{field} contains a control character")
    return value.strip()


def parse_text(values: Mapping[str, str], field: str, limit: int = MAX_TEXT) -> str | None:
    """An optional text field: ``None`` when absent or blank."""
    raw = values.get(field)
    if raw is None:
        return None
    text = _clean(field, raw)
    if len(text) > limit:
        raise BadInput(f"{field} is {len(text)} characters; the limit is {limit}")
    return text or None


#: The overlaps a backfill asked over the web may use (``buffer_one`` is the command line's).
BACKFILL_OVERLAPS = ("allow", "skip")


def parse_backfill_overlap(values: Mapping[str, str], field: str = "overlap") -> str:
    """A backfill's overlap (``allow`` when absent); ``buffer_one`` is refused, as it waits for
    each firing to finish and would hold the request open. Other values the Client checks."""
    overlap = parse_text(values, field, 20) or "allow"
    if overlap == "buffer_one":
        raise BadInput(
            "overlap 'buffer_one' fires the ticks one after another, each once the one before "
            "has finished, which would hold this request open: use the command line "
            "(parallel-scheduler recurring backfill --overlap buffer_one), or overlap 'skip'"
        )
    return overlap


def parse_task(values: Mapping[str, str], field: str = "task") -> str | None:
    """A task name, or the start of one (``task_prefix``)."""
    return parse_text(values, field, MAX_TASK_NAME_LENGTH)


def parse_id_prefix(values: Mapping[str, str], field: str = "id_prefix") -> str | None:
    """The start of a job id: printable, no space (no job id holds one)."""
    text = parse_text(values, field, MAX_JOB_ID_LENGTH)
    if text is not None and " " in text:
        raise BadInput(f"{field} {text!r} has a space: no job id holds one")
    return text


def parse_search(values: Mapping[str, str], field: str = "error_contains") -> str | None:
    """Text to search for inside a value (a job's last error)."""
    return parse_text(values, field, MAX_ERROR_SEARCH)


def parse_state(values: Mapping[str, str], field: str = "state") -> JobState | None:
    text = parse_text(values, field)
    if text is None or text == "any":
        return None
    try:
        return JobState(text)
    except ValueError:
        known = ", ".join(s.value for s in JobState)
        raise BadInput(f"{field} {text!r} is not a job state; known: any, {known}") from None


def parse_job_id(values: Mapping[str, str], field: str = "id") -> str:
    raw = values.get(field)
    if raw is None or not isinstance(raw, str) or not raw.strip():
        raise BadInput(f"{field}: a job id is required")
    if len(raw) > 1000:
        raise BadInput(f"{field} is {len(raw)} characters; no job id is that long")
    try:
        return validate_job_id(raw.strip())
    except InvalidIdentifierError as exc:
        raise BadInput(f"{field}: {exc}") from None


@lru_cache(maxsize=1)
def zone_names() -> tuple[str, ...]:
    """The zones a person may pick: the IANA names a schedule may use (``triggers``)."""
    return ("UTC", *sorted(triggers.zone_names() - {"UTC"}))


#: The group of the zones whose names hold no region (``CET``, ``Japan``, ``Zulu``, ...).
OTHER_ZONES = "Other"


@lru_cache(maxsize=1)
def zone_groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every zone but UTC by region, the part of its name before the first ``/`` (``Africa``,
    ``America``, ``Asia``, ``Europe``, ...), regions in alphabetical order, then the zones of no
    region under ``OTHER_ZONES``."""
    regions: dict[str, list[str]] = {}
    for name in zone_names()[1:]:
        region, slash, _ = name.partition("/")
        regions.setdefault(region if slash else OTHER_ZONES, []).append(name)
    other = regions.pop(OTHER_ZONES, [])
    grouped = [(region, tuple(names)) for region, names in sorted(regions.items())]
    return (*grouped, (OTHER_ZONES, tuple(other))) if other else tuple(grouped)


def _zone_option(name: str, selected: str) -> Markup:
    chosen = Markup(" selected") if name == selected else ""
    return Markup('<option value="{0}"{1}>{0}</option>').format(name, chosen)


@lru_cache(maxsize=64)
def zone_options(selected: str) -> Markup:
    """The options of every zone, ``selected`` chosen: UTC first, then one ``<optgroup>`` per
    region (``zone_groups``; class ``zone-region``, by which ``live.js`` finds the lists it adds a
    filter box to). Built once per zone, since every page carries it (some 600 options)."""
    groups = (
        Markup('<optgroup label="{0}" class="zone-region">{1}</optgroup>').format(
            region, Markup("").join(_zone_option(name, selected) for name in names)
        )
        for region, names in zone_groups()
    )
    return _zone_option("UTC", selected) + Markup("").join(groups)


def parse_zone(values: Mapping[str, str], field: str = "tz") -> zoneinfo.ZoneInfo | None:
    text = parse_text(values, field, 100)
    if text is None:
        return None
    if text not in zone_names():
        raise BadInput(f"{field} {text!r} is not a known time zone (for example Europe/Paris)")
    return zoneinfo.ZoneInfo(text)


def parse_instant(
    values: Mapping[str, str], field: str, zone: zoneinfo.ZoneInfo | timezone
) -> float | None:
    """An ISO 8601 date-time (a ``datetime-local`` input's value, or with an offset); without
    an offset it is read in ``zone``. Must lie inside the valid range of instants."""
    text = parse_text(values, field, 64)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"{field} {text!r} is not a date-time; use YYYY-MM-DDTHH:MM[:SS]") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        epoch = moment.timestamp()
    except (OverflowError, ValueError, OSError):
        epoch = math.inf
    if not in_range(epoch):
        raise BadInput(f"{field} {text!r} is outside the valid range (1970-01-01 .. 9999-01-01)")
    return epoch


def _parse_number(
    values: Mapping[str, str], field: str, width: int, convert: Callable[[str], _N], what: str
) -> _N | None:
    """``field`` read by ``convert`` (``int`` or ``float``), ``None`` when it is empty; text
    ``convert`` refuses is named with ``what`` it should have been."""
    text = parse_text(values, field, width)
    if text is None:
        return None
    try:
        return convert(text)
    except ValueError:
        raise BadInput(f"{field} {text!r} is not {what}") from None


def parse_int(values: Mapping[str, str], field: str, default: int, low: int, high: int) -> int:
    number = _parse_number(values, field, 20, int, "a whole number")
    if number is None:
        return default
    if not low <= number <= high:
        raise BadInput(f"{field} must be between {low} and {high}, not {number}")
    return number


def parse_seconds(values: Mapping[str, str], field: str) -> float | None:
    seconds = _parse_number(values, field, 40, float, "a number of seconds")
    if seconds is not None and not math.isfinite(seconds):
        raise BadInput(f"{field} must be a finite number of seconds")
    return seconds


def cursor_text(due_at: float, job_id: str) -> str:
    """The ``after`` parameter for the page that follows the row ``(due_at, job_id)``."""
    return f"{due_at!r}:{job_id}"


def parse_cursor(values: Mapping[str, str]) -> tuple[float, str] | None:
    """``after=<due_at>:<id>`` (the due time as written by ``cursor_text``: it holds no ':')."""
    text = parse_text(values, "after", 1100)
    if text is None:
        return None
    due, sep, job_id = text.partition(":")
    try:
        due_at = float(due)
    except ValueError:
        due_at = math.nan
    if not sep or not job_id or not math.isfinite(due_at):
        raise BadInput(f"after {text!r} is not a page cursor (<due time>:<job id>)")
    try:
        return due_at, validate_job_id(job_id)
    except InvalidIdentifierError as exc:
        raise BadInput(f"after: the page cursor's job id: {exc}") from None


#: Cursors of earlier pages a "Previous page" link remembers at most (each can be 220
#: characters: the URL stays short); beyond, the oldest are dropped and "First page" remains.
TRAIL_DEPTH = 20


def parse_trail(trail: list[str]) -> list[str]:
    """The ``back`` parameters: the ``after`` cursor of each earlier page, oldest first (an empty
    one for the first page), each checked as a cursor."""
    if len(trail) > TRAIL_DEPTH:
        raise BadInput(f"back: at most {TRAIL_DEPTH} earlier pages are remembered")
    for text in trail:
        if text:
            parse_cursor({"after": text})
    return trail


#: The longest JSON text a form field may hold (a recurring job's args or kwargs).
MAX_JSON = 20_000


def parse_json(
    values: Mapping[str, str], field: str, kind: type[list[Any]] | type[dict[str, Any]]
) -> Any:
    """A JSON array (``kind=list``) or object (``dict``) typed into a text area; empty: empty."""
    raw = values.get(field)
    if raw is None or not raw.strip():
        return kind()
    if len(raw) > MAX_JSON:
        raise BadInput(f"{field} is {len(raw)} characters; the limit is {MAX_JSON}")
    if any(not (c.isprintable() or c in "\n\r\t") for c in raw):
        raise BadInput(f"{field} contains a control character")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise BadInput(f"{field} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        what = 'array, e.g. [1, "a"]' if kind is list else 'object, e.g. {"k": 1}'
        raise BadInput(f"{field} must be a JSON {what}")
    return value
