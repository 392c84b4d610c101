"""Planning a coming tick before it (``recurring/planning_ahead.py``), on every adapter: a pass
within ``PLAN_AHEAD`` seconds of the earliest next run plans its firings and writes nothing; the
pass at the tick fires them exactly once, with the deterministic id; a job edited, paused, removed
or fired by another scheduler in between fires as it is at the tick (or not at all); a plan that
the misfire policy no longer allows is dropped; a job whose firing reads outcomes is not planned.

The oracle is the storage itself, read after each step: no firing job before the tick, one after.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from devtools.waiting import wait_until
from parallel_scheduler import Client, JobState, Settings
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.planning_ahead import PAGE, PLAN_AHEAD, plan_tick
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler, RecurringPassStats
from storage_adapters import Storage

LEAD = 2.5  # seconds from saving to the tick: within PLAN_AHEAD, long enough to plan first
HOUR = 3600.0


@pytest.fixture
def scheduler(storage: Storage) -> Iterator[RecurringJobScheduler]:
    made = RecurringJobScheduler(storage, Settings())
    yield made
    made.close()


def coming_tick(
    storage: Storage, rid: str = "report", tick: float | None = None, **options: object
) -> tuple[Client, float]:
    """An hourly job whose first tick is ``tick``, by default ``LEAD`` seconds away (on whole
    milliseconds)."""
    tick = round(storage.now() + LEAD, 3) if tick is None else tick
    client = Client(storage)
    start = datetime.fromtimestamp(tick, timezone.utc)
    client.recurring.save(rid, "tasks.report", every=HOUR, start=start, **options)  # type: ignore[arg-type]
    return client, tick


def another_pass(storage: Storage) -> RecurringPassStats:
    """One full pass of a second scheduler over the same store (nothing planned ahead)."""
    other = RecurringJobScheduler(storage, Settings())
    try:
        return other.run_pass()
    finally:
        other.close()


def wait_for(storage: Storage, instant: float) -> None:
    """Until the storage clock is 50 ms past ``instant``: past the scheduler's estimate of it
    too (``clock.py``), which may differ from a fresh read by a few milliseconds."""
    wait_until(lambda: storage.now() >= instant + 0.05, timeout=LEAD + 30, interval=0.02)


def test_a_coming_tick_is_planned_before_it_and_fired_at_it_once(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    assert LEAD < PLAN_AHEAD
    # Given an hourly job whose tick is 2.5 s away
    client, tick = coming_tick(storage)
    # When a pass runs before the tick
    before = scheduler.run_once()
    # Then it planned the job and wrote nothing: no firing, the next run unchanged
    assert (before.planned, before.created) == (1, 0), before
    assert storage.get_job(firing_id("report", tick)) is None
    record = storage.get_recurring("report")
    assert record is not None and record.next_run_at == pytest.approx(tick, abs=1e-6)
    # When the pass at the tick runs
    wait_for(storage, tick)
    at = scheduler.run_once()
    # Then the planned firing was written, once, due at the tick, and the next run moved on
    assert (at.from_plan, at.fired, at.created) == (1, 1, 1), at
    job = storage.get_job(firing_id("report", tick))
    assert job is not None and job.state is JobState.SCHEDULED and job.due_at == tick
    after = client.recurring.get("report")
    assert after is not None and after.next_run_at is not None
    assert after.next_run_at.timestamp() == pytest.approx(tick + HOUR, abs=1e-6)
    assert [entry["job_id"] for entry in after.history] == [job.id]
    # And another scheduler's pass finds nothing more to fire
    assert another_pass(storage).created == 0


def test_a_job_edited_after_planning_fires_as_it_is_at_the_tick(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    client, tick = coming_tick(storage)
    assert scheduler.run_once().planned == 1
    # Given the job's task changes after its tick was planned (same schedule, same tick)
    start = datetime.fromtimestamp(tick, timezone.utc)
    client.recurring.save("report", "tasks.other", every=HOUR, start=start, mode="update")
    wait_for(storage, tick)
    at = scheduler.run_once()
    # Then the plan was not used: the pass planned it again and fired the new task
    assert (at.from_plan, at.created) == (0, 1), at
    job = storage.get_job(firing_id("report", tick))
    assert job is not None and job.task == "tasks.other"


def test_a_job_paused_or_removed_after_planning_does_not_fire(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    client, tick = coming_tick(storage, "paused")
    coming_tick(storage, "removed", tick)
    assert scheduler.run_once().planned == 2
    assert client.recurring.pause("paused", note="not today")
    assert client.recurring.remove("removed")
    wait_for(storage, tick + 0.01)
    at = scheduler.run_once()
    assert (at.from_plan, at.created) == (0, 0), at
    assert storage.get_job(firing_id("paused", tick)) is None


def test_a_tick_fired_by_another_scheduler_first_is_not_fired_again(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    _, tick = coming_tick(storage)
    assert scheduler.run_once().planned == 1
    wait_for(storage, tick)
    assert another_pass(storage).created == 1  # planned nothing: fired it as it came
    at = scheduler.run_pass()
    assert (at.from_plan, at.created) == (0, 0), at
    assert storage.get_job(firing_id("report", tick)) is not None


def test_a_plan_past_its_misfire_grace_is_dropped_for_the_policy(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    # Given a job that skips ticks late by more than 1 s, planned before its tick
    _, tick = coming_tick(storage, misfire_policy="skip", misfire_grace=1.0)
    assert scheduler.run_once().planned == 1
    # When the pass comes 1.5 s after the tick (a stalled scheduler)
    wait_for(storage, tick + 1.5)
    at = scheduler.run_pass()
    # Then the tick is missed, as the policy says, not fired from the plan
    assert (at.from_plan, at.created, at.missed) == (0, 0, 1), at
    assert storage.get_job(firing_id("report", tick)) is None


@pytest.mark.parametrize(
    "policy", [{"overlap": "skip"}, {"pause_after_failures": 3}], ids=["overlap", "failures"]
)
def test_a_job_whose_firing_reads_outcomes_is_planned_at_its_tick(
    storage: Storage, scheduler: RecurringJobScheduler, policy: dict[str, object]
) -> None:
    # Given a job whose tick depends on its earlier firings' outcomes, and a plain one
    _, tick = coming_tick(storage, "reads", **policy)
    coming_tick(storage, "plain", tick)
    # Then only the plain one is planned ahead; at the tick both fire, once each
    assert scheduler.run_once().planned == 1
    wait_for(storage, tick)
    at = scheduler.run_once()
    assert (at.from_plan, at.created) == (1, 2), at
    assert storage.get_job(firing_id("reads", tick)) is not None


def test_a_tick_larger_than_a_read_is_planned_page_by_page_and_fired_once_each(
    storage: Storage, scheduler: RecurringJobScheduler
) -> None:
    # Given more jobs at one coming tick than one read returns
    count = PAGE + 500
    tick = round(storage.now() + 4.5, 3)  # time to save them before planning
    start = datetime.fromtimestamp(tick, timezone.utc)
    items = [
        {"id": f"r{n:05d}", "task": "t.a", "every": HOUR, "start": start} for n in range(count)
    ]
    Client(storage).recurring.save_many(items)
    # When a pass plans the tick and the pass at the tick fires it
    assert scheduler.run_once().planned == count
    wait_for(storage, tick)
    at = scheduler.run_once()
    # Then every job fired once, from the plan
    assert (at.from_plan, at.created) == (count, count), at
    again = scheduler.run_pass()
    assert again.created == 0
    missing = [n for n in range(count) if storage.get_job(firing_id(f"r{n:05d}", tick)) is None]
    assert missing == []


def test_planning_stops_at_the_tick(storage: Storage) -> None:
    # Given a coming tick, and a clock that says it has come: nothing is read or planned
    _, tick = coming_tick(storage)
    pool = BoundedPool(2)
    try:
        late = plan_tick(storage, tick, None, None, {}, pool, lambda: tick)
        early = plan_tick(storage, tick, None, None, {}, pool, lambda: tick - 1)
    finally:
        pool.shutdown()
    assert (late.firings(), early.firings()) == (0, 1)
