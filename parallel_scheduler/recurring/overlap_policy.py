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
from parallel_scheduler.recurring.failure_policy import check_pause_after_failures

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
    @property
    def pause_after_failures(self) -> int | None: ...


def check_schedule(schedule: _Overlapping) -> None:
    """Check a schedule's ``overlap`` and ``overlap_timeout`` as it is made, the timeout kept
    as a float (an ``int`` read from JSON or typed in compares and stores the same), and its
    ``pause_after_failures`` (``failure_policy.py``), the other field that reads outcomes."""
    object.__setattr__(
        schedule, "overlap_timeout", check_overlap(schedule.overlap, schedule.overlap_timeout)
    )
    check_pause_after_failures(schedule.pause_after_failures)


def check_recorded(
    overlap: str, outcomes_recorded: bool, pause_after_failures: int | None = None
) -> None:
    """Refuse ``overlap`` other than ``allow``, or a ``pause_after_failures``, when execution
    outcomes are known not to be recorded (``Settings.record_outcomes`` off): no firing would
    ever be seen to finish, or to fail."""
    if outcomes_recorded:
        return
    if overlap != "allow":
        _needs_outcomes(f"overlap {overlap!r}", "use overlap 'allow'")
    if pause_after_failures is not None:
        _needs_outcomes(
            f"pause_after_failures={pause_after_failures}", "leave pause_after_failures unset"
        )


def _needs_outcomes(what: str, instead: str) -> None:
    """The one refusal of a setting that reads execution outcomes while they are off."""
    raise InvalidJobError(
        f"{what} needs execution outcomes, and record_outcomes is off: "
        f"turn it on (PARALLEL_SCHEDULER_RECORD_OUTCOMES=true) or {instead}"
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
