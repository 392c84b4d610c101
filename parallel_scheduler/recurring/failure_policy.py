"""What a recurring job's ``pause_after_failures`` may be, checked in one place for every entry
point (the ``Schedule``, the command line, the dashboard's forms, the HTTP API);
``failure_pause.py`` applies it when a job is due. Like ``overlap`` it reads execution outcomes,
so it shares ``overlap_policy.check_recorded``'s refusal where recording is known to be off."""

from __future__ import annotations

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.history import HISTORY_LIMIT

__all__ = ["MAX_PAUSE_AFTER_FAILURES", "check_pause_after_failures"]

#: The most consecutive failed firings a job may wait for: the count is read from the firings
#: its history keeps (the newest ``HISTORY_LIMIT``), so a longer one could never be seen.
MAX_PAUSE_AFTER_FAILURES = HISTORY_LIMIT


def check_pause_after_failures(value: object) -> int | None:
    """``value`` if it is ``None`` or a whole number from 1 to ``MAX_PAUSE_AFTER_FAILURES``;
    otherwise ``InvalidJobError`` in the words every entry point shows (Client, CLI, API,
    dashboard)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_PAUSE_AFTER_FAILURES
    ):
        raise InvalidJobError(
            "pause after failures must be a whole number from 1 to "
            f"{MAX_PAUSE_AFTER_FAILURES}, not {value!r}"
        )
    return value
