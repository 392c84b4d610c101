"""``max_runs``: a recurring job that ends after so many scheduled firings.

The count is kept in the job's history (``history.scheduled_runs``), written by the firing step
in the same compare-and-set as the firing jobs it counts, so it is never a separate
check-then-act: a tick is counted by the one step that fires it, and a step planned from a
stale read writes nothing. Only scheduled ticks count, as Temporal's schedules count their
``limited_actions``: a manual trigger and a backfill fire outside the schedule and do not.

Once the count reaches the limit the job has ended, as when its end date passes: its next run is
``None``. Saving it again with a higher ``max_runs`` keeps the count, so it resumes from the next
tick after now.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from parallel_scheduler.recurring.history import last_scheduled_tick, read_history, scheduled_runs

if TYPE_CHECKING:
    from parallel_scheduler.recurring.misfires import FiringPlan

__all__ = [
    "limit_plan",
    "limit_reached",
    "runs_of",
    "runs_text",
]


def limit_plan(plan: FiringPlan, max_runs: int | None, history: str) -> FiringPlan:
    """``plan`` within the runs ``max_runs`` leaves after those ``history`` counts: the earliest
    ticks up to the limit, and no next run once it is reached (the job has ended). A tick not
    after the latest scheduled tick kept fires again uncounted (it was counted, and its job
    has its id: nothing is created). Unlimited: ``plan``."""
    if max_runs is None:
        return plan
    entries = read_history(history, [])
    last = last_scheduled_tick(entries)
    counted = [tick for tick in plan.ticks if last is None or tick > last]
    left = max(max_runs - scheduled_runs(entries), 0)
    if len(counted) < left:
        return plan
    repeated = len(plan.ticks) - len(counted)  # sorted: the repeated ticks come first
    return replace(plan, ticks=plan.ticks[: repeated + left], next_run_at=None)


def runs_of(history: str) -> int:
    """The scheduled ticks a stored history counts (``history.scheduled_runs``; an unreadable
    history counts none, as the next firing starts it afresh)."""
    return scheduled_runs(read_history(history, []))


def limit_reached(max_runs: int | None, runs: int) -> bool:
    """Whether a job that fired ``runs`` scheduled ticks has ended by its ``max_runs``."""
    return max_runs is not None and runs >= max_runs


def runs_text(runs: int, max_runs: int | None) -> str:
    """The count as listings show it: ``12`` (no limit), ``2 of 3``, ``3 of 3 (ended)``."""
    if max_runs is None:
        return str(runs)
    ended = " (ended)" if limit_reached(max_runs, runs) else ""
    return f"{runs} of {max_runs}{ended}"
