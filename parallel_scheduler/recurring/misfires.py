"""What a due recurring job fires: its on-time ticks, and of the ticks it missed (no scheduler
ran, storage was down) what its misfire policy and catch-up window allow.

A pure function of (schedule, due, now), tested with exact instants (tests/unit/test_triggers.py)
and against a brute-force oracle (tests/unit/test_dst_oracle.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from parallel_scheduler.calendars import Calendar, Exclusion, before
from parallel_scheduler.recurring.triggers import SCHEDULE_CACHE, Schedule, next_tick, ticks_back

__all__ = ["MISSED_COUNT_LIMIT", "FiringPlan", "next_included", "plan_firing"]

#: Missed ticks are counted exactly up to this many; a longer outage reports this number.
MISSED_COUNT_LIMIT = 10_000


@dataclass(frozen=True)
class FiringPlan:
    ticks: list[float]  # to fire now, earliest first
    next_run_at: float | None
    #: ticks not fired on time (missed by more than the grace, or older than the catch-up
    #: window), fired or not; exact up to MISSED_COUNT_LIMIT
    missed: int


@lru_cache(maxsize=SCHEDULE_CACHE)
def _tick_and_next(schedule: Schedule, due: float) -> tuple[bool, float | None]:
    """Whether ``due`` is a tick of ``schedule``, and the tick after it: worked out once for
    every recurring job of one schedule due at one instant (10,000 on one cron at one tick
    cost one walk, not 10,000)."""
    return next_tick(schedule, math.nextafter(due, -math.inf)) == due, next_tick(schedule, due)


def plan_firing(
    schedule: Schedule, due: float, now: float, calendars: Mapping[str, Calendar] | None = None
) -> FiringPlan:
    """What to fire for a recurring job whose next run ``due`` has come, at storage time ``now``.

    Ticks within the grace fire. Of the missed ones, ``skip`` fires none, ``run_once`` the
    latest, ``run_all`` the ``misfire_cap`` latest. A tick older than the catch-up window (when
    the schedule has one) never fires, whatever the grace and the policy. All ticks not fired
    on time are counted as missed. A tick whose local date a calendar of the schedule's
    ``exclude`` holds (among ``calendars``, the pass's; a name not there excludes nothing) is
    neither fired nor missed, and the next run is the first tick not excluded.
    """
    exclusion = (
        Exclusion.of(schedule.exclude, calendars) if calendars and schedule.exclude else None
    )
    if exclusion is not None:
        return _plan_excluding(schedule, due, now, exclusion)
    window = math.inf if schedule.catch_up_window is None else schedule.catch_up_window
    is_tick, following = _tick_and_next(schedule, due)
    late = now - due
    if (
        is_tick
        and 0 <= late <= min(schedule.misfire_grace, window)
        and (following or math.inf) > now
    ):
        return FiringPlan([due], following, 0)  # the usual case: one tick, on time
    until = now if schedule.end_at is None else min(now, schedule.end_at)
    fired, missed = _sorted_out(schedule, ticks_back(schedule, due, until), now)
    return FiringPlan(fired, next_tick(schedule, max(now, due)), missed)


def _plan_excluding(schedule: Schedule, due: float, now: float, excluded: Exclusion) -> FiringPlan:
    """``plan_firing`` for a schedule some of whose ticks are excluded: the same rules over the
    ticks that are not (no fast path: a calendar is read per pass, not cached per schedule)."""
    until = now if schedule.end_at is None else min(now, schedule.end_at)
    ticks = _included_back(schedule, due, until, excluded)
    fired, missed = _sorted_out(schedule, ticks, now)
    return FiringPlan(fired, next_included(schedule, max(now, due), excluded), missed)


def _sorted_out(schedule: Schedule, ticks: Iterable[float], now: float) -> tuple[list[float], int]:
    """The misfire rules over ``ticks`` (latest first), at storage time ``now``: the ticks to
    fire, in order (those within the grace and the window, and of the others as many of the
    latest as the policy keeps), and how many were missed (counted up to a limit)."""
    window = math.inf if schedule.catch_up_window is None else schedule.catch_up_window
    keep = {"skip": 0, "run_once": 1, "run_all": schedule.misfire_cap}[schedule.misfire_policy]
    fired: list[float] = []
    kept: list[float] = []
    missed = 0
    for tick in ticks:
        late = now - tick
        if late <= schedule.misfire_grace and late <= window:
            fired.append(tick)
            continue
        missed += 1
        if len(kept) < keep and late <= window:
            kept.append(tick)
        if missed >= MISSED_COUNT_LIMIT:
            break
    return sorted(fired + kept), missed


def _included_back(
    schedule: Schedule, due: float, until: float, excluded: Exclusion
) -> Iterator[float]:
    """``ticks_back`` without the excluded ticks: a walk that meets one starts again just
    before its excluded range begins, so a long range is one jump, not a walk."""
    while until >= due:
        for tick in ticks_back(schedule, due, until):
            span = excluded.span(tick)
            if span is None:
                yield tick
                continue
            until = min(before(span[0]), before(tick))
            break
        else:
            return


def next_included(schedule: Schedule, after: float, excluded: Exclusion | None) -> float | None:
    """The first tick strictly after ``after`` that ``excluded`` does not hold, or ``None``:
    a tick inside an excluded range jumps to the first tick after the range."""
    tick = next_tick(schedule, after)
    while tick is not None and excluded is not None:
        span = excluded.span(tick)
        if span is None:
            break
        tick = next_tick(schedule, max(before(span[1]), tick))
    return tick
