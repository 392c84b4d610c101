"""The one documented range for instants and durations, checked before anything is written.

Every entry point (``Client``, the Celery plugin, the CLI, ``reschedule``, recurring jobs) checks
its due times, countdowns, expiry instants and intervals here, so a value that would be stored and
later break ``list``/``status`` for everyone (a year outside 1-9999 cannot be shown as a date) is
refused at the door with an error that names it.

* Instants (``eta``, ``expires``, a recurring start/end date): from 1970-01-01T00:00:00Z to
  9999-01-01T00:00:00Z, in epoch seconds ``[MIN_INSTANT, MAX_INSTANT]``. The upper bound leaves a
  day of room so that the instant can be shown in any time zone.
* Countdowns: finite, ``>= 0``, and landing at or before ``MAX_INSTANT``.
* Intervals (``every``): from 1 second to ``MAX_INTERVAL`` (100 years).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from .errors import InvalidJobError

__all__ = [
    "MAX_INSTANT",
    "MAX_INTERVAL",
    "MIN_INSTANT",
    "MIN_INTERVAL",
    "check_countdown",
    "check_instant",
    "check_interval",
    "in_range",
]

MIN_INSTANT = 0.0
MAX_INSTANT = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
MIN_INTERVAL = 1.0
MAX_INTERVAL = 100 * 366 * 86400.0
_RANGE_TEXT = "1970-01-01T00:00:00Z to 9999-01-01T00:00:00Z"


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def in_range(epoch: float) -> bool:
    """True when ``epoch`` is a finite instant inside the documented range."""
    return math.isfinite(epoch) and MIN_INSTANT <= epoch <= MAX_INSTANT


def check_instant(name: str, epoch: object) -> float:
    """``epoch`` as a float, or ``InvalidJobError`` naming ``name`` and the value."""
    if not _is_number(epoch):
        raise InvalidJobError(f"{name} must be epoch seconds or an aware datetime, not {epoch!r}")
    value = float(epoch)  # type: ignore[arg-type]
    if not in_range(value):
        raise InvalidJobError(f"{name} {epoch!r} is outside the valid range ({_RANGE_TEXT})")
    return value


def check_countdown(name: str, seconds: object, now: float) -> float:
    """``now + seconds`` when that lands inside the range; ``InvalidJobError`` otherwise."""
    if not _is_number(seconds):
        raise InvalidJobError(f"{name} must be a number of seconds, not {seconds!r}")
    value = float(seconds)  # type: ignore[arg-type]
    if not math.isfinite(value) or value < 0:
        raise InvalidJobError(f"{name} must be finite and >= 0, not {seconds!r}")
    if now + value > MAX_INSTANT:
        raise InvalidJobError(
            f"{name} {seconds!r} lands after 9999-01-01T00:00:00Z, outside the valid range "
            f"({_RANGE_TEXT})"
        )
    return now + value


def check_interval(name: str, seconds: object) -> float:
    """An interval of ``MIN_INTERVAL`` to ``MAX_INTERVAL`` seconds, or ``InvalidJobError``."""
    if not _is_number(seconds):
        raise InvalidJobError(f"{name} must be a number of seconds, not {seconds!r}")
    value = float(seconds)  # type: ignore[arg-type]
    if not math.isfinite(value) or not MIN_INTERVAL <= value <= MAX_INTERVAL:
        raise InvalidJobError(
            f"{name} must be from {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds (100 years), "
            f"not {seconds!r}"
        )
    return value
