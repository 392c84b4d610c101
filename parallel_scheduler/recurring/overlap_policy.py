"""What a recurring job's ``overlap`` and ``overlap_timeout`` may be, checked in one place for
every entry point (the ``Schedule``, the command line, the dashboard's forms, the HTTP API), and
the prerequisite they have; ``overlap.py`` applies them when a job fires.

``allow`` (the default) fires every tick whatever its earlier firings do. ``skip`` does not fire
a tick while an earlier firing has not finished; ``buffer_one`` keeps one such tick and fires it
once they have. "Finished" is read from the execution outcomes the Celery plugin records, so a
policy other than ``allow`` is refused where recording is known to be off (``check_recorded``).
"""

from __future__ import annotations

from typing import Literal, Protocol

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.ranges import check_interval, shown

__all__ = [
    "DEFAULT_OVERLAP_TIMEOUT",
    "HOLDING_POLICIES",
    "OVERLAP_POLICIES",
    "OverlapPolicy",
    "check_overlap",
    "check_recorded",
    "check_schedule",
    "seconds_arg",
]

OverlapPolicy = Literal["allow", "skip", "buffer_one"]
OVERLAP_POLICIES: tuple[OverlapPolicy, ...] = ("allow", "skip", "buffer_one")
#: The policies that hold ticks back (``allow`` never does): the labels of the metric.
HOLDING_POLICIES: tuple[OverlapPolicy, ...] = ("skip", "buffer_one")
#: Seconds after its tick at which a firing whose outcome never came back (its worker died, or
#: outcomes are not recorded) counts as finished: an hour, longer than most periodic tasks run.
DEFAULT_OVERLAP_TIMEOUT = 3600.0


def check_overlap(overlap: object, timeout: object) -> float:
    """The timeout as a float if ``overlap`` is one of ``OVERLAP_POLICIES`` and ``timeout`` a
    number of seconds from 1 s to 100 years; otherwise ``InvalidJobError`` in the words every
    entry point shows (Client, CLI, API, dashboard)."""
    if not isinstance(overlap, str) or overlap not in OVERLAP_POLICIES:
        raise InvalidJobError(
            f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, not {shown(overlap)}"
        )
    return check_interval("overlap timeout", timeout)


class _Overlapping(Protocol):
    """What ``check_schedule`` reads of a ``Schedule`` (not imported: it imports this)."""

    @property
    def overlap(self) -> str: ...
    @property
    def overlap_timeout(self) -> float: ...


def check_schedule(schedule: _Overlapping) -> None:
    """Check a schedule's ``overlap`` and ``overlap_timeout`` as it is made, the timeout kept
    as a float (an ``int`` read from JSON or typed in compares and stores the same)."""
    object.__setattr__(
        schedule, "overlap_timeout", check_overlap(schedule.overlap, schedule.overlap_timeout)
    )


def check_recorded(overlap: str, outcomes_recorded: bool) -> None:
    """Refuse ``overlap`` other than ``allow`` when execution outcomes are known not to be
    recorded (``Settings.record_outcomes`` off): no firing would ever be seen to finish."""
    if overlap != "allow" and not outcomes_recorded:
        raise InvalidJobError(
            f"overlap {overlap!r} needs execution outcomes, and record_outcomes is off: "
            "turn it on (PARALLEL_SCHEDULER_RECORD_OUTCOMES=true) or use overlap 'allow'"
        )


def seconds_arg(text: str | None) -> object:
    """An ``overlap_timeout`` typed as text (a command-line option, a form field): the number
    it spells, ``DEFAULT_OVERLAP_TIMEOUT`` when empty, else the text as typed, which
    ``check_overlap`` then refuses naming it (the same words as every other entry point)."""
    if text is None or not text.strip():
        return DEFAULT_OVERLAP_TIMEOUT
    try:
        return float(text)
    except ValueError:
        return text.strip()
