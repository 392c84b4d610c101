"""A recurring schedule as people read it: the cron expression in words (the ``cron-descriptor``
package of the ``dashboard`` extra; without it, no words, the expression still shows) and its
next runs, computed by the scheduler's own ``next_tick`` so the preview is what will fire."""

from __future__ import annotations

import logging

from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.triggers import Schedule, next_tick

__all__ = ["NEXT_RUNS", "describe", "next_runs"]

logger = logging.getLogger(__name__)
#: The runs a preview lists.
NEXT_RUNS = 5


def describe(schedule: Schedule) -> str | None:
    """``At 02:30`` for ``30 2 * * *``, ``Every 5 minutes``, ``every 300 s``; ``None`` when the
    cron expression cannot be put in words (the package missing, or an expression it cannot
    read although the scheduler can)."""
    if schedule.every is not None:
        return f"every {schedule.every:g} s"
    try:
        from cron_descriptor import (  # type: ignore[import-untyped]
            Options,
            get_description,
        )
    except ImportError:
        return None
    options = Options()
    options.use_24hour_time_format = True
    options.verbose = False
    try:
        text: str = get_description(schedule.cron, options)
    except Exception as exc:  # a page must render: the expression itself is shown beside
        logger.debug("cron-descriptor cannot read %r: %s", schedule.cron, exc)
        return None
    return f"{text} ({schedule.timezone})"


def next_runs(schedule: Schedule, now: float, count: int = NEXT_RUNS) -> list[float]:
    """The next ``count`` ticks after ``now`` (fewer when the schedule ends; none from a stored
    schedule that cannot be read, so its page still renders)."""
    runs: list[float] = []
    after = now
    try:
        while len(runs) < count:
            tick = next_tick(schedule, after)
            if tick is None:
                break
            runs.append(tick)
            after = tick
    except InvalidJobError as exc:
        logger.debug("no next runs for %s: %s", schedule.describe(), exc)
    return runs
