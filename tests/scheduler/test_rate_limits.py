"""Rate limits where jobs are released (issue 25, section 2), in one scheduler's passes on every
adapter and release path: the jobs of a limited queue or task beyond the budget are given back
due at their reserved slots, in due order, with a note saying which limit they wait for and their
attempt uncounted; the jobs beside them go at once; the wait is reported as lateness of its own
cause; and on Redis the one-script release, which knows no limits, steps aside while one is in
force. The slots are checked against the limit's arithmetic (one job every ``1 / rate`` seconds
after a burst), not against the code that reserves them. The cross-process budget is
tests/faults/test_rate_limit_release.py's."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery
from prometheus_client import CollectorRegistry

from devtools.waiting import wait_until
from parallel_scheduler import (
    CallableDispatcher,
    Client,
    DelayedJobScheduler,
    JobState,
    Settings,
)
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.delayed.envelopes import with_envelopes
from parallel_scheduler.process.metrics import PREFIX, PrometheusRecorder
from storage_adapters import NewJob, PauseKind, Storage
from storage_adapters.redis.storage import RedisStorage
from tests.conftest import REDIS_URL
from tests.recording_dispatcher import Recorder

RATE = 10  # a job every 0.1 s
BURST = 2
TOLERANCE = 1e-3


def due_jobs(storage: Storage, queue: str, count: int, task: str = "mail.send") -> list[NewJob]:
    """``count`` jobs of ``queue``, due in the past, one millisecond apart, in id order."""
    now = storage.now()
    return [
        NewJob(f"{queue}-{i}", task, '{"args":[],"kwargs":{},"options":{}}', now - 5 + i / 1000,
               queue=queue)
        for i in range(count)
    ]  # fmt: skip


def scheduler_for(storage: Storage, recorder: Recorder, mode: str) -> DelayedJobScheduler:
    settings = Settings(release_mode=mode, max_degree_of_parallelism=1)  # type: ignore[arg-type]
    return DelayedJobScheduler(storage, CallableDispatcher(recorder), settings)


@pytest.fixture(params=["batch", "per_job"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_jobs_over_the_limit_wait_for_their_slots_in_due_order_and_the_rest_go_at_once(
    storage: Storage, mode: str
) -> None:
    # Given a limit of 10 a second with a burst of 2 on queue emails
    storage.set_rate_limit(PauseKind.QUEUE, "emails", RATE, 1.0, BURST, "test")
    # And 6 due emails beside 3 due reports
    emails = due_jobs(storage, "emails", 6)
    reports = due_jobs(storage, "reports", 3, task="report.build")
    storage.add_jobs([*reversed(emails), *reports])  # stored out of due order
    sent_at: dict[str, float] = {}  # on the storage clock, as the slots are
    recorder = Recorder(hook=lambda job_id: sent_at.setdefault(job_id, storage.now()))
    scheduler = scheduler_for(storage, recorder, mode)
    registry = CollectorRegistry()
    scheduler.metrics = PrometheusRecorder(registry)
    try:
        # When one pass runs
        stats = scheduler.run_once()
        # Then the reports and the burst's two emails went, the four others wait
        sent = set(recorder.ids)
        assert sent == {"reports-0", "reports-1", "reports-2", "emails-0", "emails-1"}
        assert (stats.released, stats.deferred, stats.failed) == (5, 4, 0)
        waiting = [storage.get_job(f"emails-{i}") for i in range(2, 6)]
        assert all(job is not None and job.state is JobState.SCHEDULED for job in waiting)
        dues = [job.due_at for job in waiting if job is not None]
        # each at its slot: one every 0.1 s after the burst, in due order, the first 0.1 s on
        assert all(abs(b - a - 1 / RATE) < TOLERANCE for a, b in itertools.pairwise(dues))
        assert 0 < dues[0] - storage.now() <= 1 / RATE + TOLERANCE
        for job in waiting:
            assert job is not None and job.attempts == 0
            assert job.last_error is not None and "rate limit of queue 'emails'" in job.last_error
        # and the wait is lateness of its own cause, one observation per job that waits
        late = registry.get_sample_value(
            PREFIX + "release_lateness_seconds_count", {"cause": "rate_limit"}
        )
        assert late == 4

        # When passes run until every job went
        def all_sent() -> bool:
            scheduler.run_once()
            return len(recorder.ids) == 9

        wait_until(all_sent, timeout=30, interval=0.02)
        # Then the emails went once each, in due order, none before its slot
        order = [job_id for job_id in recorder.ids if job_id.startswith("emails-")]
        assert order == [f"emails-{i}" for i in range(6)]
        for job_id, due in zip(order[2:], dues, strict=True):
            assert sent_at[job_id] >= due - TOLERANCE
    finally:
        scheduler.close()


def test_a_task_limit_holds_its_task_in_any_queue_and_the_later_slot_wins(
    storage: Storage,
) -> None:
    # Given a limit on the task report.build (1 a second, no burst) and one on queue emails
    storage.set_rate_limit(PauseKind.TASK, "report.build", 1, 1.0, 1, "test")
    storage.set_rate_limit(PauseKind.QUEUE, "emails", RATE, 1.0, 5, "test")
    jobs = [
        *due_jobs(storage, "reports", 2, task="report.build"),
        *due_jobs(storage, "emails", 2, task="report.build"),  # both limits
        *due_jobs(storage, "other", 1, task="mail.send"),  # neither
    ]
    storage.add_jobs(jobs)
    recorder = Recorder()
    scheduler = scheduler_for(storage, recorder, "batch")
    try:
        stats = scheduler.run_once()
    finally:
        scheduler.close()
    # Then one report.build went (the task's burst of one), the other job at once
    assert stats.deferred == 3 and stats.released == 2
    assert "other-0" in recorder.ids
    waiting = [storage.get_job(job.id) for job in jobs if job.id not in recorder.ids]
    dues = sorted(job.due_at for job in waiting if job is not None)
    # the task's slots, a second apart: the queue's (0.1 s apart, burst 5) are earlier
    assert all(abs(b - a - 1.0) < TOLERANCE for a, b in itertools.pairwise(dues))
    notes = {job.last_error for job in waiting if job is not None}
    assert notes == {"waiting for the rate limit of task 'report.build' (1/s)"}


def test_removing_a_limit_lets_new_jobs_go_at_once(storage: Storage) -> None:
    storage.set_rate_limit(PauseKind.QUEUE, "emails", 1, 60.0, 1, "test")
    storage.add_jobs(due_jobs(storage, "emails", 2))
    recorder = Recorder()
    scheduler = scheduler_for(storage, recorder, "batch")
    try:
        assert scheduler.run_once().deferred == 1
        waiting = storage.get_job("emails-1")
        assert waiting is not None and waiting.due_at > storage.now() + 50  # a minute's slot
        # When the limit is removed, new jobs of the queue go in the next pass
        assert storage.remove_rate_limit(PauseKind.QUEUE, "emails")
        storage.add_jobs([NewJob("late", "mail.send", "{}", storage.now() - 1, queue="emails")])
        stats = scheduler.run_once()
        assert stats.released == 1 and stats.deferred == 0 and "late" in recorder.ids
        # and the job given a slot before keeps it (documented)
        kept = storage.get_job("emails-1")
        assert kept is not None and kept.due_at == waiting.due_at
    finally:
        scheduler.close()


@pytest.mark.parametrize("change", ["raise", "remove"])
def test_raising_or_removing_a_limit_lets_the_waiting_jobs_go_at_once(
    storage: Storage, change: str
) -> None:
    # Given a limit of one job a minute, under which 4 of 5 due jobs wait for minutes
    client = Client(storage, retry_for=1.0)
    client.limit_queue("emails", "1/m")
    storage.add_jobs(due_jobs(storage, "emails", 5))
    recorder = Recorder()
    scheduler = scheduler_for(storage, recorder, "batch")
    try:
        assert scheduler.run_once().deferred == 4
        # When the limit is raised to 1,000 a second (burst 10), or removed, through the Client
        if change == "raise":
            client.limit_queue("emails", "1000/s", burst=10)
        else:
            assert client.unlimit_queue("emails")
        # Then the next pass sends the 4 waiting jobs, in their order, none deferred again
        stats = scheduler.run_once()
        assert (stats.released, stats.deferred) == (4, 0)
        assert recorder.ids == [f"emails-{i}" for i in range(5)]
    finally:
        scheduler.close()


@pytest.fixture
def redis_storage(storage: Storage) -> Iterator[RedisStorage]:
    if not isinstance(storage, RedisStorage):
        pytest.skip("the one-script release is Redis storage's")
    yield storage


def test_the_one_script_release_steps_aside_while_a_limit_is_in_force(
    redis_storage: RedisStorage,
) -> None:
    storage = redis_storage
    queue = f"limited-{uuid.uuid4().hex[:8]}"
    app = Celery("limits", broker=REDIS_URL)
    app.conf.update(task_serializer="json", accept_content=["json"], task_default_queue=queue)
    publisher = RedisPublisher(app)
    broker = redis.Redis.from_url(REDIS_URL)
    scheduler = DelayedJobScheduler(storage, publisher, Settings())
    try:
        storage.set_rate_limit(PauseKind.QUEUE, queue, RATE, 1.0, BURST, "test")
        storage.add_jobs(with_envelopes(due_jobs(storage, queue, 5), publisher))
        # When a pass runs with the limit in force: the burst went, by the batch path
        stats = scheduler.run_once()
        assert (stats.released, stats.deferred) == (BURST, 5 - BURST)
        assert not scheduler.releases_by_script
        assert broker.llen(queue) == BURST
        # When the limit is removed and its jobs' slots have come, the script releases again (a
        # job of another queue beside them: the app sends every job to its default queue)
        storage.remove_rate_limit(PauseKind.QUEUE, queue)
        storage.add_jobs(with_envelopes(due_jobs(storage, f"{queue}-x", 1), publisher))
        wait_until(lambda: scheduler.run_once() and broker.llen(queue) == 6, timeout=30)
        assert scheduler.releases_by_script
        ids = [json.loads(m)["headers"]["id"] for m in broker.lrange(queue, 0, -1)]
        assert sorted(ids) == sorted([f"{queue}-x-0", *(f"{queue}-{i}" for i in range(5))])
    finally:
        scheduler.close()
        broker.delete(queue)
        broker.close()
