"""Retention over every adapter: old finished jobs are deleted in short slices by one process at
a time, beside the release passes (never inside one), never a scheduled job, and not at all with
``retention`` 0."""

from __future__ import annotations

import threading
from typing import Any

from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, Client, DelayedJobScheduler, JobSpec, Settings
from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.retention import LOCK_NAME, MAX_SLICE, MIN_SLICE, RetentionPurger
from storage_adapters import JobState, NewJob, Storage, list_jobs

RETENTION = 0.5


def nothing(*_: Any) -> None:
    """A dispatcher that accepts every job (these tests concern what happens after)."""


def scheduler(storage: Storage, **settings: Any) -> DelayedJobScheduler:
    return DelayedJobScheduler(storage, CallableDispatcher(nothing), Settings(**settings))


def purger(storage: Storage, retention: float | None = RETENTION, **kw: Any) -> RetentionPurger:
    return RetentionPurger(storage, StorageClock(storage), retention, "me", 5.0, **kw)


def finished_and_waiting(storage: Storage) -> tuple[list[str], list[str]]:
    """Twelve jobs released (Enqueued) and two cancelled, all finished more than ``RETENTION``
    ago, by a scheduler that keeps everything; and three jobs still scheduled for later."""
    client = Client(storage)
    due = [r.job_id for r in client.schedule_many([JobSpec("t.due") for _ in range(12)])]
    later = [r.job_id for r in client.schedule_many([JobSpec("t.l", countdown=3600)] * 5)]
    for job_id in later[3:]:
        assert storage.cancel(job_id)
    assert scheduler(storage, retention=0).run_once().released == 12
    last = max(j.updated_at for j in list_jobs(storage, None, 100))
    wait_until(lambda: storage.now() > last + RETENTION, timeout=10)
    return due + later[3:], later[:3]


def test_a_running_scheduler_purges_old_finished_jobs_and_keeps_scheduled_ones(
    storage: Storage,
) -> None:
    # Given fourteen old finished jobs and three scheduled ones
    finished, waiting = finished_and_waiting(storage)
    # When a delayed scheduler with a short retention runs
    active = scheduler(storage, retention=RETENTION, poll_interval=0.05)
    thread = threading.Thread(target=active.run_forever, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        # Then every finished job is deleted
        wait_until(lambda: all(storage.get_job(j) is None for j in finished), timeout=15)
    finally:
        active.stop()
        thread.join(10)
    assert active.purger.purged == len(finished)
    # And the scheduled jobs are all still there
    assert [storage.get_job(j) is not None for j in waiting] == [True] * 3
    assert storage.count_by_state()[JobState.SCHEDULED] == 3
    # And the purger let go of its lock when it stopped
    assert storage.lock_holder(LOCK_NAME) is None


def test_a_pass_never_purges(storage: Storage) -> None:
    # Given old finished jobs, and then due jobs
    finished, _ = finished_and_waiting(storage)
    Client(storage).schedule_many([JobSpec("t.d") for _ in range(7)])
    # When one pass runs with retention on
    stats = scheduler(storage, retention=RETENTION, batch_size=5).run_once()
    # Then it released the due jobs and deleted nothing: purging is not a pass's work
    assert stats.released == 7
    assert all(storage.get_job(j) is not None for j in finished)


def test_slices_are_bounded_and_come_back_short_when_nothing_is_left(storage: Storage) -> None:
    # Given fourteen old finished jobs
    finished, _ = finished_and_waiting(storage)
    purging = purger(storage)
    # When slices run until one comes back short
    slices = []
    while True:
        deleted, full = purging.purge_slice()
        slices.append(deleted)
        if not full:
            break
    # Then they deleted every finished job, none more than the largest slice
    assert sum(slices) == len(finished) and max(slices) <= MAX_SLICE
    assert all(storage.get_job(j) is None for j in finished)
    # And one more slice finds nothing
    assert purging.purge_slice() == (0, False)


def test_jobs_finished_within_the_retention_stay(storage: Storage) -> None:
    finished, _ = finished_and_waiting(storage)
    assert purger(storage, retention=3600).purge_slice() == (0, False)
    assert all(storage.get_job(j) is not None for j in finished)


def test_retention_0_keeps_every_job_and_starts_no_thread(storage: Storage) -> None:
    finished, _ = finished_and_waiting(storage)
    keeper = purger(storage, retention=0)
    keeper.start()
    assert not keeper.enabled and keeper._thread is None
    assert keeper.purge_slice() == (0, False)
    assert all(storage.get_job(j) is not None for j in finished)


def test_one_process_purges_at_a_time(storage: Storage) -> None:
    # Given old finished jobs, and another process holding the retention lock
    finished, _ = finished_and_waiting(storage)
    other = storage.acquire_lock(LOCK_NAME, "other", 30)
    assert other is not None
    # When this purger tries to drain, Then it deletes nothing
    second = purger(storage)
    second._drain()
    assert second.purged == 0
    assert all(storage.get_job(j) is not None for j in finished)
    # And once the other lets go, it drains them all
    assert storage.release_lock(other)
    second._drain()
    assert second.purged == len(finished)


def test_slices_whose_fixed_cost_exceeds_the_budget_keep_the_floor_size(storage: Storage) -> None:
    # Given 300 old finished jobs, and a purger whose budget no slice can meet (a slice's fixed
    # cost, its round trips, outweighs it: PostgreSQL pays three per slice)
    now = storage.now()
    storage.add_jobs([NewJob(f"old{i}", "t", "{}", now - 60) for i in range(300)])
    lock = storage.acquire_lock("delayed-scheduler", "a", 30)
    assert lock is not None
    assert len(storage.mark_enqueued(storage.claim_due(300, lock, 30))) == 300
    marked = storage.now()
    wait_until(lambda: storage.now() > marked + RETENTION, timeout=10)
    slow = purger(storage, budget=1e-9)
    # When it drains them, Then every slice deletes the floor size, never fewer: sizing by pace
    # alone shrank them to one job each (25 jobs/s at 1,000,000 rows on PostgreSQL)
    slices = [slow.purge_slice()[0] for _ in range(4)]
    assert slices == [MIN_SLICE, MIN_SLICE, MIN_SLICE, 0]
