"""How values are shown on the pages: instants in UTC and in the viewer's zone, JSON pretty
printed, durations. Every function here is total: a stored value that is out of range, not a
number, or not JSON-able is shown as its text, never raised (one bad row must not break a page).
"""

from __future__ import annotations

import json
import math
import zoneinfo
from datetime import datetime, timezone
from typing import Any

from parallel_scheduler.jobs import display_instant
from parallel_scheduler.ranges import in_range

__all__ = ["duration", "in_zone", "pretty", "utc"]


def utc(epoch: float | None) -> str:
    return display_instant(epoch)


def in_zone(epoch: float | None, zone: zoneinfo.ZoneInfo | timezone) -> str:
    if epoch is None:
        return "-"
    if not isinstance(epoch, (int, float)) or not in_range(epoch):
        return display_instant(epoch)
    return datetime.fromtimestamp(epoch, tz=zone).isoformat()


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
