"""How values are shown on the pages: the one home of the time rule, JSON pretty printed,
durations in words, state badges.

The time rule, everywhere: an instant is shown relative to now ("in 2 h", "3 min ago") in a
``<time>`` element whose ``title`` (shown on hover) is the absolute time in the viewer's zone,
to the second, and whose ``datetime`` is the same instant in UTC (ISO 8601). The zone is named
once, in the page header. Stored epochs (``expires``, due times, heartbeats) all go through
``when``: never a raw float.

Every function here is total: a stored value that is out of range, not a number, or not JSON-able
is shown as its text, never raised (one bad row must not break a page).
"""

from __future__ import annotations

import json
import math
import zoneinfo
from datetime import datetime, timezone
from typing import Any

from markupsafe import Markup

from parallel_scheduler.jobs import display_instant
from parallel_scheduler.ranges import in_range

__all__ = [
    "absolute",
    "badge",
    "duration",
    "in_zone",
    "pretty",
    "relative",
    "shown_options",
    "utc",
    "when",
]

Zone = zoneinfo.ZoneInfo | timezone
#: Units of a duration in words, largest first.
_UNITS = ((365 * 86400.0, "y"), (86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"))


def utc(epoch: float | None) -> str:
    return display_instant(epoch)


def _epoch(value: object) -> float | None:
    """``value`` (an epoch, a datetime or ISO 8601 text) as an epoch in the valid range, or
    ``None`` when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        try:
            value = moment.timestamp()
        except (OverflowError, ValueError, OSError):
            return None
    if isinstance(value, str):
        try:
            return _epoch(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    if isinstance(value, (int, float)) and in_range(float(value)):
        return float(value)
    return None


def in_zone(epoch: float | None, zone: Zone) -> str:
    """ISO 8601 in ``zone``, to the second."""
    if epoch is None:
        return "-"
    seconds = _epoch(epoch)
    if seconds is None:
        return display_instant(epoch)
    return datetime.fromtimestamp(math.floor(seconds), tz=zone).isoformat()


def absolute(value: object, zone: Zone) -> str:
    """``2030-03-18 02:46:40``: the instant in ``zone``, to the second (the zone is named once
    on the page); anything that is not an instant as its text."""
    if value is None:
        return "-"
    seconds = _epoch(value)
    if seconds is None:
        return display_instant(value) if isinstance(value, (int, float)) else str(value)
    return datetime.fromtimestamp(math.floor(seconds), tz=zone).strftime("%Y-%m-%d %H:%M:%S")


def _amount(seconds: float) -> str:
    """The largest unit that fits, whole: ``2 h``, ``3 min``, ``45 s``, ``3 d``, ``56 y``."""
    for size, unit in _UNITS:
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "0 s"


def relative(seconds: float) -> str:
    """``in 2 h``, ``3 min ago``, ``now`` (within a second): ``seconds`` from now."""
    if not math.isfinite(seconds):
        return "-"
    if abs(seconds) < 1:
        return "now"
    text = _amount(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def when(value: object, zone: Zone, now: float) -> Markup:
    """The time rule: relative text, the absolute time in ``zone`` on hover, UTC in
    ``datetime``. ``value`` is an epoch, a datetime or ISO 8601 text."""
    if value is None:
        return Markup("-")
    seconds = _epoch(value)
    if seconds is None:
        return Markup('<span class="bad-instant">{0}</span>').format(absolute(value, zone))
    whole = math.floor(seconds)
    return Markup('<time class="when" datetime="{0}" title="{1}">{2}</time>').format(
        datetime.fromtimestamp(whole, tz=timezone.utc).isoformat(),
        in_zone(whole, zone),
        relative(seconds - now),
    )


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)


def duration(seconds: float | None) -> str:
    """A duration in words, two units at most: ``2 h 5 min``, ``1 min 30 s``, ``0.250 s``."""
    if seconds is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return "-"
    if not math.isfinite(seconds):
        return "-"
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.3f} s" if seconds < 1 else f"{seconds:.1f} s"
    parts: list[str] = []
    rest = float(math.floor(seconds))
    for size, unit in _UNITS:
        if rest >= size and len(parts) < 2:
            parts.append(f"{int(rest // size)} {unit}")
            rest %= size
        elif parts:
            break
    return " ".join(parts)


def badge(state: object) -> Markup:
    """A state as a coloured badge (``badge-<state>`` in the stylesheet)."""
    text = str(getattr(state, "value", state))
    slug = "".join(c if c.isalnum() else "-" for c in text.lower())
    return Markup('<span class="badge state-badge badge-{0}">{1}</span>').format(slug, text)


def shown_options(options: dict[str, Any], zone: Zone) -> dict[str, Any]:
    """A job's options with its stored ``expires`` epoch as a time in ``zone``, never a float."""
    if not isinstance(options, dict) or options.get("expires") is None:
        return options
    return {**options, "expires": in_zone(options["expires"], zone)}
