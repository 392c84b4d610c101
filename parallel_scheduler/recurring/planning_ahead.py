"""Planning a coming tick before it comes: a scheduler that sees the earliest next run within
``PLAN_AHEAD`` seconds reads the recurring jobs due at that instant and plans their firings
(ticks, firing jobs, broker messages, history: ``firing.plan_chunk``), writing nothing. At the
tick it only fires the planned chunks (``firing.finish_chunk``: one storage step each), so the
work between the tick and the broker is the storage step, not the planning.

Nothing changes in storage before the tick, and a planned firing is written under the same
compare-and-set on the version it was planned from: a job edited, paused, removed or fired by
another scheduler in between is not fired from the plan (its step finds another version) but
planned again by the pass at the tick, as one not planned ahead. Jobs whose firing depends on
outcomes (an ``overlap`` other than ``allow``, ``pause_after_failures``) are planned at the
tick, from outcomes read then. A plan is used only while it is what planning at that moment
would give: the tick within the job's misfire grace and catch-up window, its next tick still
ahead; otherwise the pass plans afresh.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from parallel_scheduler.calendars import Calendar
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.queues import QueueRouter
from parallel_scheduler.recurring.firing import FIRE_CHUNK, Envelope, PlannedChunk, plan_chunk
from parallel_scheduler.recurring.misfires import FiringPlan
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import RecurringRecord, Storage

__all__ = ["PLAN_AHEAD", "PLAN_AHEAD_LIMIT", "TickPlan", "plan_tick"]

#: Seconds before the earliest next run that a scheduler plans the jobs due then: enough to
#: plan 100,000 firings on a 2-core machine (about 8 s with PostgreSQL on the same machine);
#: planning stops at the tick, and what it did not reach is planned at it.
PLAN_AHEAD = 15.0
#: The most recurring jobs one tick's plan holds in memory (about 1-3 KB each, with their
#: messages); the rest of a larger tick are planned at it, as without planning ahead.
PLAN_AHEAD_LIMIT = 100_000
#: Recurring jobs per read: on Redis one read is one script, which holds the server (about 13 us
#: a job), so a large tick is read in pages, planned as they come.
PAGE = 2_000


@dataclass
class TickPlan:
    """The planned chunks of the recurring jobs whose next run is ``tick`` (storage clock)."""

    tick: float
    chunks: list[PlannedChunk]

    def firings(self) -> int:
        return sum(chunk.firings() for chunk in self.chunks)

    def usable_at(self, now: float) -> list[PlannedChunk]:
        """The chunks, each cut to the jobs whose plan is still what planning at ``now`` would
        give (``_still_on_time``); empty chunks left out."""
        kept = []
        for chunk in self.chunks:
            keep = [i for i, plan in enumerate(chunk.plans) if _still_on_time(plan, now)]
            if len(keep) < len(chunk.plans):
                chunk.plans = [chunk.plans[i] for i in keep]
                chunk.planned = [chunk.planned[i] for i in keep]
            if chunk.planned:
                kept.append(chunk)
        return kept


def plan_tick(
    storage: Storage,
    tick: float,
    envelope: Envelope | None,
    route: QueueRouter | None,
    calendars: Mapping[str, Calendar],
    pool: BoundedPool,
    now: Callable[[], float],
) -> TickPlan:
    """Read the enabled recurring jobs whose next run is ``tick`` (at most
    ``PLAN_AHEAD_LIMIT``) and plan the firings of those that may be planned ahead, a chunk of
    ``FIRE_CHUNK`` each in ``pool``, a page at a time until ``now()`` (storage clock) reaches
    the tick: the pass at the tick must not wait for planning."""

    def plan(chunk: Sequence[RecurringRecord]) -> PlannedChunk:
        return plan_chunk(storage, tick, envelope, chunk, route, calendars)

    planned: list[PlannedChunk] = []
    seen: set[str] = set()  # a job read twice (pages of a changing index) is planned once
    offset = 0
    while offset < PLAN_AHEAD_LIMIT and now() < tick:
        page = call_storage(partial(storage.fetch_due_recurring, PAGE, tick, offset))
        offset += len(page)
        ahead = [r for r in page if r.id not in seen and _plannable(r, tick)]
        seen.update(record.id for record in ahead)
        chunks = [ahead[i : i + FIRE_CHUNK] for i in range(0, len(ahead), FIRE_CHUNK)]
        planned += (chunk for chunk in pool.map(plan, chunks) if chunk.planned)
        if len(page) < PAGE:
            break
    return TickPlan(tick, planned)


def _plannable(record: RecurringRecord, tick: float) -> bool:
    """Due at ``tick`` exactly, with a schedule that fires without reading outcomes."""
    if record.next_run_at != tick:
        return False
    try:
        schedule = Schedule.from_json(record.schedule)
    except InvalidJobError:
        return False  # reported by the pass at the tick
    return schedule.overlap == "allow" and schedule.pause_after_failures is None


def _still_on_time(plan: tuple[int, Schedule, FiringPlan, int], now: float) -> bool:
    """A plan made at its tick holds at ``now`` while the tick is within the grace and the
    catch-up window and the next tick is still ahead (``misfires.plan_firing``'s usual case)."""
    _, schedule, firing_plan, _ = plan
    ticks, following = firing_plan.ticks, firing_plan.next_run_at
    window = math.inf if schedule.catch_up_window is None else schedule.catch_up_window
    late = now - ticks[0] if ticks else 0.0
    return 0 <= late <= min(schedule.misfire_grace, window) and (following or math.inf) > now
