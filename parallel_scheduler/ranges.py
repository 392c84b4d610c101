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
* A listing's ``limit`` (from 1) and ``offset`` (from 0): at most ``MAX_PAGE`` (2**31 - 1), an
  integer every backend takes (PostgreSQL refuses ``LIMIT 10**20``, Redis's Lua reads it as no
  integer at all), checked before any storage call.
* Nesting of ``args`` and ``kwargs``: at most ``MAX_NESTING`` (32) levels of lists and objects,
  the argument list or keyword object itself counting as the first (``[[1]]`` as args is 2). Far
  below what JSON decoding, the release and a worker's kombu JSON can carry (near 1000 levels
  Python's recursion limit breaks each), so a job accepted is a job that can be delivered.

A number may be any real (``int``, ``float``, ``Decimal``, ``Fraction``; not ``bool``); one too
large for a float (``10**400``) is out of range, named, never a bare ``OverflowError``.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from parallel_scheduler.errors import InvalidJobError
from storage_adapters.checks.values import MAX_COUNT

__all__ = [
    "MAX_INSTANT",
    "MAX_INTERVAL",
    "MAX_NESTING",
    "MAX_PAGE",
    "MIN_INSTANT",
    "MIN_INTERVAL",
    "as_float",
    "check_countdown",
    "check_instant",
    "check_interval",
    "check_nesting",
    "check_page",
    "in_range",
    "is_number",
    "lands_too_late",
    "shown",
    "too_deep",
]

MIN_INSTANT = 0.0
MAX_INSTANT = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
MIN_INTERVAL = 1.0
MAX_INTERVAL = 100 * 366 * 86400.0
MAX_NESTING = 32
MAX_PAGE = MAX_COUNT  # the storage's own bound (storage_adapters.checks.values), checked first
_RANGE_TEXT = "1970-01-01T00:00:00Z to 9999-01-01T00:00:00Z"
#: How much of a refused value an error message quotes: a few levels, items and characters.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict = 3, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 60, 40, 60


def shown(value: object) -> str:
    """``value`` as an error message quotes it: its ``repr`` (control characters and lone
    surrogates escaped, so the message stays one line), shortened (``reprlib``: never a
    ``RecursionError`` on a deep value, nor a ``ValueError`` on an int of 5,000 digits)."""
    try:
        return _SHOWN.repr(value)
    except ValueError:  # an int too long to turn into text at all
        return f"<an {type(value).__name__} too long to show>"


def is_number(value: object) -> bool:
    """A real number (``int``, ``float``, ``Decimal``, ``Fraction``), not a ``bool``."""
    return not isinstance(value, bool) and isinstance(value, (numbers.Real, Decimal))


def as_float(value: object) -> float:
    """A real number (``is_number``) as a float; one past a float's range becomes an infinity
    of its sign, a signalling NaN (``Decimal("sNaN")``, which ``float`` refuses) NaN."""
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]
    except ValueError:
        return math.nan


def in_range(epoch: float) -> bool:
    """True when ``epoch`` is a finite instant inside the documented range."""
    return math.isfinite(epoch) and MIN_INSTANT <= epoch <= MAX_INSTANT


def check_instant(name: str, epoch: object) -> float:
    """``epoch`` as a float, or ``InvalidJobError`` naming ``name`` and the value."""
    if not is_number(epoch):
        raise InvalidJobError(
            f"{name} must be epoch seconds or an aware datetime, not {shown(epoch)}"
        )
    value = as_float(epoch)
    if not in_range(value):
        raise InvalidJobError(f"{name} {shown(epoch)} is outside the valid range ({_RANGE_TEXT})")
    return value


def _finite(number: object) -> bool:
    """Whether a real number is finite as given (``10**400`` is, though no float holds it)."""
    if isinstance(number, Decimal):
        return number.is_finite()
    return not isinstance(number, float) or math.isfinite(number)


def check_countdown(name: str, seconds: object, now: float) -> float:
    """``now + seconds`` when that lands inside the range; ``InvalidJobError`` otherwise."""
    if not is_number(seconds):
        raise InvalidJobError(f"{name} must be a number of seconds, not {shown(seconds)}")
    value = as_float(seconds)
    if not _finite(seconds) or value < 0:
        raise InvalidJobError(f"{name} must be finite and >= 0, not {shown(seconds)}")
    if now + value > MAX_INSTANT:  # an int past a float's range (10**400) too: it is finite
        raise lands_too_late(name, shown(seconds))
    return now + value


def lands_too_late(name: str, text: str) -> InvalidJobError:
    """The error for a countdown ``name`` (shown as ``text``) that lands past the range."""
    return InvalidJobError(
        f"{name} {text} lands after 9999-01-01T00:00:00Z, outside the valid range ({_RANGE_TEXT})"
    )


def check_interval(name: str, seconds: object) -> float:
    """An interval of ``MIN_INTERVAL`` to ``MAX_INTERVAL`` seconds, or ``InvalidJobError``."""
    if not is_number(seconds):
        raise InvalidJobError(f"{name} must be a number of seconds, not {shown(seconds)}")
    value = as_float(seconds)
    if not math.isfinite(value) or not MIN_INTERVAL <= value <= MAX_INTERVAL:
        raise InvalidJobError(
            f"{name} must be from {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds (100 years), "
            f"not {shown(seconds)}"
        )
    return value


def too_deep(name: str, text: str) -> InvalidJobError:
    """The error for ``name`` (``args``, ``kwargs``) nested past ``MAX_NESTING``; ``text`` is
    the value as shown (``shown``)."""
    return InvalidJobError(
        f"{name} nest deeper than {MAX_NESTING} levels of lists and objects "
        f"(ranges.MAX_NESTING): {text}"
    )


def check_nesting(name: str, value: object) -> None:
    """Refuse ``value`` (``args``, ``kwargs``) when its lists and objects nest deeper than
    ``MAX_NESTING``, naming ``name``. Level by level, not recursive: a value nested 50,000 deep
    (or holding itself) is refused, never a ``RecursionError``."""
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > MAX_NESTING:
            raise too_deep(name, shown(value))
        below: list[Any] = []
        for container in level:
            items = container.values() if isinstance(container, Mapping) else container
            below.extend(v for v in items if isinstance(v, (list, tuple, dict)))
        level = below


def check_page(limit: object, offset: object) -> tuple[int, int]:
    """A listing's ``limit`` (1 to ``MAX_PAGE``) and ``offset`` (0 to ``MAX_PAGE``), or
    ``InvalidJobError`` naming the one out of range."""
    for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_PAGE:
            raise InvalidJobError(
                f"{name} must be an integer from {low} to {MAX_PAGE}, not {shown(value)}"
            )
    return limit, offset  # type: ignore[return-value]


def instant(name: str, epoch: object, problems: list[str]) -> str | None:
    """``epoch`` as ISO 8601 UTC text; out of range or not a number: its raw text, and a
    problem naming the field. ``None`` stays ``None``."""
    if epoch is None:
        return None
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        problems.append(f"{name} {epoch!r} is not a number")
        return repr(epoch)
    if not in_range(float(epoch)):
        problems.append(f"{name} {epoch!r} is outside the valid range")
        return repr(epoch)
    try:
        return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()
    except (OverflowError, ValueError, OSError) as exc:
        problems.append(f"{name} {epoch!r} cannot be shown as a date: {exc}")
        return repr(epoch)
