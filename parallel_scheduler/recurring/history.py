"""A recurring job's runs as stored with it: its recent firings (scheduled ticks and manual
triggers alike) and its last run, kept so that a trigger counts as a run without moving a tick.

The history is JSON text the schedulers and triggers write and storage only keeps: a list of
``{"tick": <epoch seconds>, "job_id": <firing job id>, "runs": <scheduled runs so far>}``, a
trigger's entry also carrying ``"trigger": true``, oldest first, the newest ``HISTORY_LIMIT``
kept. Rows written before triggers were recorded have no trigger entries and read the same.
Reading never fails: an entry this version cannot use is shown with what it lacks left empty.

``runs`` counts the scheduled ticks fired (``max_runs`` ends a job at its limit): every entry
carries the count as it stands after it (a trigger's the count unchanged: triggers and backfills
do not count), so the newest entry holds it however many triggers came since. It is written in
the firing step's compare-and-set with the jobs it counts, so a tick is counted once. Entries
written before runs were counted (or by an older version) have none: ``scheduled_runs`` adds
their scheduled ticks to the newest count kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from parallel_scheduler.jobs import utc_datetime
from parallel_scheduler.ranges import in_range

__all__ = [
    "HISTORY_LIMIT",
    "RecentFiring",
    "add_history",
    "last_scheduled_tick",
    "later_run",
    "read_history",
    "recent_firings",
    "scheduled_runs",
]

HISTORY_LIMIT = 20  # recent firings kept per recurring job
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_ENTRY_START = re.compile(r'\{"tick":')


def read_history(history: str, problems: list[str]) -> list[dict[str, Any]]:
    """The stored entries; unreadable text, or a list of something else: none, and a problem."""
    try:
        entries = json.loads(history or "[]")
    except ValueError as exc:
        problems.append(f"history is unreadable ({exc})")
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append("history is not a list of firings")
        return []
    return entries


def add_history(
    history: str, entries: Sequence[tuple[float, str]], *, trigger: bool = False
) -> str:
    """The history JSON with ``entries`` (instant, job id) appended, marked as triggers when
    ``trigger``, the oldest dropped, each carrying the scheduled runs counted after it: a tick
    counts once (one not after the latest scheduled tick kept was counted already), a trigger
    not at all. An unreadable history is started afresh, so a row spoiled by hand can still
    fire and be triggered."""
    stored = [] if history in ("", "[]") else read_history(history, [])
    runs, last = scheduled_runs(stored), last_scheduled_tick(stored)
    mark = {"trigger": True} if trigger else {}
    added: list[dict[str, Any]] = []
    for at, job_id in entries:
        if not trigger and (last is None or at > last):  # a tick fired again counts once
            runs, last = runs + 1, at
        added.append({"tick": at, "job_id": job_id, **mark, "runs": runs})
    if not stored:
        return _ENCODER.encode(added[-HISTORY_LIMIT:])
    spliced = _spliced(history, stored, added)
    if spliced is not None:
        return spliced
    return _ENCODER.encode((stored + added)[-HISTORY_LIMIT:])


def scheduled_runs(entries: Sequence[dict[str, Any]]) -> int:
    """The scheduled ticks fired so far: the newest entry's ``runs`` plus the scheduled entries
    written after it without one; with no count kept, the scheduled entries kept."""
    uncounted = 0
    for entry in reversed(entries):
        runs = entry.get("runs")
        if isinstance(runs, int) and not isinstance(runs, bool) and runs >= 0:
            return runs + uncounted
        if entry.get("trigger") is not True:
            uncounted += 1
    return uncounted


def last_scheduled_tick(entries: Sequence[dict[str, Any]]) -> float | None:
    """The latest scheduled tick kept (not a trigger's instant), or ``None``: a tick at or
    before it that fires again (a next run moved back) was counted already."""
    ticks = [entry.get("tick") for entry in entries if entry.get("trigger") is not True]
    usable = [float(t) for t in ticks if isinstance(t, (int, float)) and in_range(t)]
    return max(usable, default=None)


def _spliced(history: str, stored: list[dict[str, Any]], added: list[dict[str, Any]]) -> str | None:
    """``add_history``'s answer made by cutting the oldest entries off the stored text and
    appending the new ones, without encoding the kept ones again (most of the cost); ``None``
    unless every stored entry begins ``{"tick":``, as this module writes them. Then each such
    text is a top-level entry's start: inside a JSON string a quote is always escaped, so
    ``{"tick":`` cannot occur there."""
    drop = len(stored) + len(added) - HISTORY_LIMIT
    if not stored or not added or drop >= len(stored) or not history.endswith("}]"):
        return None
    starts = [found.start() for found in _ENTRY_START.finditer(history)]
    if len(starts) != len(stored) or starts[0] != 1:
        return None
    if any(next(iter(entry), None) != "tick" for entry in stored):
        return None  # an entry of another shape: a nested {"tick": may be counted instead
    kept = history[starts[max(drop, 0)] : -1]
    return f"[{kept},{_ENCODER.encode(added)[1:-1]}]"


def later_run(stored: float | None, at: float) -> float:
    """The last run once a run at ``at`` is added: the later of the two, so a scheduled tick
    fired after a trigger (or a missed tick caught up) never moves the last run back. A stored
    value outside the valid range is replaced."""
    if isinstance(stored, (int, float)) and not isinstance(stored, bool) and in_range(stored):
        return max(at, float(stored))
    return at


@dataclass(frozen=True)
class RecentFiring:
    """One firing as shown: its job, the instant it was for, and whether a trigger made it."""

    job_id: str | None
    at: datetime | None
    trigger: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "at": self.at.isoformat() if self.at else None,
            "trigger": self.trigger,
        }

    def describe(self) -> str:
        """The job id, ``(triggered)`` after a trigger's: for text listings."""
        shown = self.job_id if self.job_id is not None else "?"
        return f"{shown} (triggered)" if self.trigger else shown


def _firing(entry: dict[str, Any]) -> RecentFiring:
    job_id = entry.get("job_id")
    tick = entry.get("tick")
    at = None
    if isinstance(tick, (int, float)) and not isinstance(tick, bool) and in_range(tick):
        at = utc_datetime(tick)
    return RecentFiring(
        job_id=job_id if isinstance(job_id, str) else None,
        at=at,
        trigger=entry.get("trigger") is True,
    )


def recent_firings(entries: Sequence[dict[str, Any]]) -> list[RecentFiring]:
    """The entries as shown, newest first."""
    return [_firing(entry) for entry in reversed(entries)]
