"""Pauses of a queue or a task as people meet them: who pauses when the caller names no one (the
``user@host`` of the calling process, so whoever sees the pause knows whom to ask), the JSON
shape of a pause in force (``status``, ``queue list --json``, ``GET /api/v1/pauses``) and the
words that say what a pause or a resume did (the command line and the dashboard). Storage keeps
the pauses and checks them (``PauseStore``, ``checks/pauses.py``).
"""

from __future__ import annotations

import getpass
import socket
from typing import Any

from parallel_scheduler.ranges import instant
from storage_adapters import PauseRecord
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH

__all__ = ["pause_view", "paused_text", "pauser", "resumed_text"]


def pauser(by: str | None = None) -> str:
    """``by`` as given (storage's checks refuse a bad one by name), else ``user@host`` of this
    process, cut to the length storage keeps."""
    if by is not None:
        return by
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's), no login record
        user = "unknown"
    return f"{user}@{socket.gethostname()}"[:MAX_PAUSED_BY_LENGTH]


def pause_view(pause: PauseRecord) -> dict[str, Any]:
    """One pause in force as a JSON-ready dict; ``paused_at`` is ISO 8601 UTC, as every time."""
    return {
        "kind": pause.kind.value,
        "name": pause.name,
        "note": pause.note,
        "paused_by": pause.paused_by,
        "paused_at": instant("paused_at", pause.paused_at, []),
    }


def _jobs(count: int, adjective: str) -> str:
    return f"{count:,} {adjective} job{'' if count == 1 else 's'}"


def paused_text(kind: str, name: str, held: int) -> str:
    """``paused queue 'emails': 1,234 scheduled jobs held``."""
    return f"paused {kind} {name!r}: {_jobs(held, 'scheduled')} held"


def resumed_text(kind: str, name: str, released: int, was_paused: bool = True) -> str:
    """``resumed queue 'emails': 1,234 held jobs scheduled again``, or that it was not paused."""
    if not was_paused and not released:
        return f"{kind} {name!r} was not paused: nothing changed"
    return f"resumed {kind} {name!r}: {_jobs(released, 'held')} scheduled again"
