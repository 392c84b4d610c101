"""What a recurring job's ``max_runs`` may be, checked in one place for every entry point (the
``Schedule``, the command line, the dashboard's forms, the HTTP API); ``limits.py`` applies it."""

from __future__ import annotations

from parallel_scheduler.errors import InvalidJobError

__all__ = ["MAX_RUNS_LIMIT", "check_max_runs", "max_runs_arg"]

#: The largest ``max_runs`` accepted: far more firings than any schedule makes (a tick a second
#: for 30,000 years), small enough to be exact as a JSON number everywhere.
MAX_RUNS_LIMIT = 1_000_000_000_000


def check_max_runs(value: object) -> int | None:
    """``value`` if it is ``None`` or a whole number from 1 to ``MAX_RUNS_LIMIT``; otherwise
    ``InvalidJobError`` in the words every entry point shows (Client, CLI, API, dashboard)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNS_LIMIT:
        raise InvalidJobError(
            f"max runs must be a whole number from 1 to {MAX_RUNS_LIMIT}, not {value!r}"
        )
    return value


def max_runs_arg(text: str | None) -> object:
    """A ``max_runs`` typed as text (a command-line option, a form field): ``None`` when empty,
    the number when it spells a whole number, else the text as typed, which ``check_max_runs``
    then refuses naming it."""
    if text is None or not text.strip():
        return None
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    return int(stripped) if digits.isascii() and digits.isdigit() else stripped
