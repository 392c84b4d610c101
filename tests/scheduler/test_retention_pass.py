"""Retention in the delayed scheduler's passes, over every adapter: the lock holder deletes old
finished jobs in bounded batches after its releases, never a scheduled job, not every poll when
idle, and not at all with ``retention`` 0."""

from __future__ import annotations

from typing import Any

from parallel_scheduler import CallableDispatcher, Client, DelayedJobScheduler, JobSpec, Settings
from storage_adapters import JobState, Storage
from tests.waiting import wait_until

RETENTION = 0.5


def nothing(*_: Any) -> None:
    """A dispatcher that accepts every job (these tests concern what happens after)."""


def scheduler(storage: Storage, **settings: Any) -> DelayedJobScheduler:
    return DelayedJobScheduler(storage, CallableDispatcher(nothing), Settings(**settings))


def finished_and_waiting(storage: Storage) -> tuple[list[str], list[str]]:
    """Twelve jobs released (Enqueued) and two cancelled, all finished more than ``RETENTION``
    ago, by a scheduler that keeps everything; and three jobs still scheduled for later."""
    client = Client(storage)
    due = [r.job_id for r in client.schedule_many([JobSpec("t.due") for _ in range(12)])]
    later = [r.job_id for r in client.schedule_many([JobSpec("t.l", countdown=3600)] * 5)]
    for job_id in later[3:]:
        assert storage.cancel(job_id)
    assert scheduler(storage, retention=0).run_once().released == 12
    last = max(j.updated_at for j in storage.list_jobs(None, 100))
    wait_until(lambda: storage.now() > last + RETENTION, timeout=10)
    return due + later[3:], later[:3]


def test_the_lock_holder_purges_old_finished_jobs_in_bounded_batches(storage: Storage) -> None:
    # Given fourteen old finished jobs and three scheduled ones
    finished, waiting = finished_and_waiting(storage)
    active = scheduler(storage, retention=RETENTION, batch_size=5)
    # When passes run, Then each purges one batch of at most five until none is left
    assert [active.run_once().purged for _ in range(3)] == [5, 5, 4]
    assert all(storage.get_job(j) is None for j in finished)
    # And the scheduled jobs are all still there
    assert [storage.get_job(j) is not None for j in waiting] == [True] * 3
    assert storage.count_by_state()[JobState.SCHEDULED] == 3
    # And once nothing was left, an idle scheduler does not purge again at the next poll
    assert storage.cancel(waiting[0])
    cancelled = storage.get_job(waiting[0])
    assert cancelled is not None
    wait_until(lambda: storage.now() > cancelled.updated_at + RETENTION, timeout=10)
    assert active.run_once().purged == 0
    assert storage.get_job(waiting[0]) is not None


def test_jobs_finished_within_the_retention_stay(storage: Storage) -> None:
    # Given old finished jobs
    finished, _ = finished_and_waiting(storage)
    # When a scheduler with an hour's retention passes
    stats = scheduler(storage, retention=3600).run_once()
    # Then it purged none of them
    assert stats.purged == 0
    assert all(storage.get_job(j) is not None for j in finished)


def test_retention_0_keeps_every_job(storage: Storage) -> None:
    # Given old finished jobs
    finished, _ = finished_and_waiting(storage)
    # When a scheduler that keeps everything passes several times
    keeper = scheduler(storage, retention=0, batch_size=5)
    assert [keeper.run_once().purged for _ in range(3)] == [0, 0, 0]
    # Then every job is still there
    assert all(storage.get_job(j) is not None for j in finished)


def test_due_jobs_are_released_before_any_purge(storage: Storage) -> None:
    # Given old finished jobs, and then more due jobs than one batch
    finished_and_waiting(storage)
    due = [r.job_id for r in Client(storage).schedule_many([JobSpec("t.d") for _ in range(7)])]
    # When one pass runs with batches of five
    stats = scheduler(storage, retention=RETENTION, batch_size=5).run_once()
    # Then it released every due job first, then purged one batch
    assert (stats.released, stats.purged) == (7, 5)
    released = [storage.get_job(j) for j in due]
    assert all(job is not None and job.state is JobState.ENQUEUED for job in released)
