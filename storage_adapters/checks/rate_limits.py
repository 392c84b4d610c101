"""What every adapter checks before setting or spending a rate limit (``RateLimitStore`` in
``contract/rate_limits.py``): one home for the bounds and the refusals."""

from __future__ import annotations

import math
from collections.abc import Sequence

from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH, check_pause_name
from storage_adapters.checks.values import epoch_seconds, error_text
from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import ClaimedJob, PauseKind

__all__ = [
    "MAX_RATE_COUNT",
    "MAX_RATE_PERIOD",
    "MAX_RESERVATION",
    "MIN_RATE_INTERVAL",
    "check_deferral",
    "check_rate_limit",
    "check_reservation",
]

#: The most releases a limit may allow per period, and at once (a burst).
MAX_RATE_COUNT = 1_000_000
#: The longest period: a day.
MAX_RATE_PERIOD = 86_400.0
#: The shortest interval between two releases a limit may set (a million a second).
MIN_RATE_INTERVAL = 1e-6
#: The most slots one reservation asks for: a release batch's worth.
MAX_RESERVATION = 100_000


def check_rate_limit(
    kind: object, name: object, count: object, period: object, burst: object, set_by: object
) -> tuple[PauseKind, str, int, float, int, str]:
    """All of a new limit, checked: the queue or task name as a pause's, ``count`` and ``burst``
    whole numbers of 1-1,000,000, ``period`` seconds in (0, 86400], at most a million releases
    a second, and a ``set_by`` of at most 255 characters."""
    checked, checked_name = check_pause_name(kind, name)
    for what, value in (("count", count), ("burst", burst)):
        if type(value) is not int or not 1 <= value <= MAX_RATE_COUNT:
            raise InvalidArgumentError(
                f"a rate limit's {what} must be a whole number of 1-{MAX_RATE_COUNT:,}, "
                f"not {value!r}"
            )
    if (
        isinstance(period, bool)
        or not isinstance(period, int | float)
        or not math.isfinite(period)
        or not 0 < period <= MAX_RATE_PERIOD
    ):
        raise InvalidArgumentError(
            f"a rate limit's period must be seconds in (0, {MAX_RATE_PERIOD:g}], not {period!r}"
        )
    assert isinstance(count, int) and isinstance(burst, int)
    if float(period) / count < MIN_RATE_INTERVAL:
        raise InvalidArgumentError(
            f"a rate limit of {count} per {period:g} s is over a million releases a second"
        )
    if not isinstance(set_by, str) or len(set_by) > MAX_PAUSED_BY_LENGTH:
        raise InvalidArgumentError(
            f"a rate limit's set_by must be a string of at most {MAX_PAUSED_BY_LENGTH} characters"
        )
    return checked, checked_name, count, float(period), burst, set_by


def check_deferral(
    claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str
) -> tuple[list[float], str]:
    """``defer``'s input: one due time per claim, each a finite number of seconds, and a note
    (as a ``last_error``); the due times as floats and the note."""
    checked_note = error_text(note)
    if len(due_ats) != len(claims):
        raise InvalidArgumentError(
            f"defer takes one due time per claim: {len(claims)} claims, {len(due_ats)} due times"
        )
    return [epoch_seconds("due_at", due_at) for due_at in due_ats], checked_note


def check_reservation(kind: object, name: object, count: object) -> tuple[PauseKind, str, int]:
    """A reservation's limit and how many slots it asks for (1-100,000)."""
    checked, checked_name = check_pause_name(kind, name)
    if type(count) is not int or not 1 <= count <= MAX_RESERVATION:
        raise InvalidArgumentError(
            f"a reservation asks for 1-{MAX_RESERVATION:,} slots, not {count!r}"
        )
    return checked, checked_name, count
