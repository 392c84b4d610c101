"""A job that cannot be sent never holds back the jobs beside it (issue 19, section 7).

A row stored before accept refused it (arguments nested deeper than JSON decodes) is written
through the storage API directly. Every ordinary job due with it is sent in the same pass, on
every adapter and in both release modes, through a plain dispatcher and through Celery's fast
path to a Redis broker (on Redis storage, the one-script release; on PostgreSQL, the chunk's
transaction). The poison job alone backs off, with an error that says why, and after
``max_send_attempts`` attempts it is set aside as ``failed`` until it is rescheduled. Its backoff
is skipped in the tests by moving its due time to now (``reschedule``), not by waiting.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from celery import Celery
from prometheus_client import CollectorRegistry

from parallel_scheduler import CallableDispatcher, Client, DelayedJobScheduler, JobState, Settings
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.delayed.envelopes import with_envelopes
from parallel_scheduler.delayed.sending import FIRST_SEND_BACKOFF, MAX_SEND_BACKOFF, send_backoff
from parallel_scheduler.dispatchers import (
    BatchDispatchError,
    Dispatcher,
    KeepGoing,
    always,
    lease_lost,
)
from parallel_scheduler.errors import UnsendableJobError
from parallel_scheduler.process.metrics import PREFIX, PrometheusRecorder
from storage_adapters import ClaimedJob, NewJob, Storage, TransactionalReleaseStorage
from storage_adapters.redis.storage import RedisStorage
from storage_adapters.sql.postgresql import IDLE_IN_TRANSACTION_SECONDS
from tests.conftest import REDIS_URL, require_server

ORDINARY = 200
POISON = "j0000-poison"  # due among the first, so in the batch mode it sits in the first chunk
TOO_DEEP = '{"args":[' + "[" * 100_000 + "]" * 100_000 + '],"kwargs":{},"options":{}}'
ATTEMPTS = 3


def ordinary_jobs(now: float) -> list[NewJob]:
    return [
        NewJob(f"j{i:04d}", "tasks.t", f'{{"args":[{i}],"kwargs":{{}},"options":{{}}}}', now - 1)
        for i in range(ORDINARY)
    ]


class Recording:
    """A plain dispatcher that keeps the id of every job it was handed."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.dispatcher = CallableDispatcher(self._send)

    def _send(self, task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        self.sent.append(job_id)


class Refusing:
    """A broker that refuses one job it cannot route, the way RabbitMQ does an unroutable
    message: a chunk holding it is sent all or nothing, so nothing of that chunk went, and the
    error names the job (``UnsendableJobError``)."""

    reason = "no such exchange"

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.dispatcher = self

    def dispatch(self, job: ClaimedJob) -> None:
        self.dispatch_many([job])

    def dispatch_many(self, jobs: Sequence[ClaimedJob], keep_going: KeepGoing = always) -> None:
        if not keep_going():
            raise BatchDispatchError(0, lease_lost())
        for job in jobs:
            if job.id == POISON:
                raise BatchDispatchError(0, UnsendableJobError(job.id, self.reason))
        self.sent += (job.id for job in jobs)


class RedisBroker:
    """Celery's fast path to the Redis broker on the storage tests' server, onto a queue of
    this test's own; ``sent`` reads the job ids off that queue's list."""

    def __init__(self) -> None:
        require_server("redis")
        self.queue = f"poison-{uuid.uuid4().hex[:10]}"
        app = Celery("poison", broker=REDIS_URL)
        app.conf.update(
            task_serializer="json", accept_content=["json"], task_default_queue=self.queue
        )
        self.dispatcher = RedisPublisher(app)
        self._client = redis.Redis.from_url(REDIS_URL)

    @property
    def sent(self) -> list[str]:
        messages = self._client.lrange(self.queue, 0, -1)
        return [str(json.loads(message)["headers"]["id"]) for message in messages]

    def close(self) -> None:
        self._client.delete(self.queue)
        self._client.close()


Sender = Recording | RedisBroker | Refusing


@pytest.fixture(params=["callable", "redis-broker", "refusing-broker"])
def sender(request: pytest.FixtureRequest) -> Iterator[Sender]:
    if request.param == "callable":
        yield Recording()
        return
    if request.param == "refusing-broker":
        yield Refusing()
        return
    broker = RedisBroker()
    try:
        yield broker
    finally:
        broker.close()


def add_poison_and_ordinary(storage: Storage, dispatcher: Dispatcher) -> list[str]:
    """The poison job and ``ORDINARY`` jobs, all due; the ordinary ones carry their broker
    message when the dispatcher builds one at accept (so Redis storage moves them by script)."""
    now = storage.now()
    ordinary = ordinary_jobs(now)
    maker = dispatcher if isinstance(dispatcher, RedisPublisher) else None
    storage.add_jobs(
        [NewJob(POISON, "tasks.t", TOO_DEEP, now - 1), *with_envelopes(ordinary, maker)]
    )
    return [job.id for job in ordinary]


def make_due(storage: Storage, job_id: str) -> None:
    """Skip a backed-off job's wait: its due time moved to now."""
    assert storage.reschedule(job_id, storage.now() - 1)


@pytest.mark.parametrize("mode", ["batch", "per_job"])
def test_every_ordinary_job_is_sent_in_the_pass_the_poison_job_backs_off(
    storage: Storage, sender: Sender, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a poison job due among 200 ordinary ones
    ordinary = add_poison_and_ordinary(storage, sender.dispatcher)
    if isinstance(storage, TransactionalReleaseStorage):
        # This test is about the poison job, not the chunk's send budget (its own test): nearly
        # all of the idle-in-transaction window, so a loaded machine's stall does not trip it.
        storage.send_budget = IDLE_IN_TRANSACTION_SECONDS * 0.9
    scheduler = DelayedJobScheduler(
        storage, sender.dispatcher, Settings(release_mode=mode, max_send_attempts=ATTEMPTS)
    )
    registry = CollectorRegistry()
    scheduler.metrics = PrometheusRecorder(registry)
    # When one pass runs
    try:
        with caplog.at_level(logging.INFO, logger="parallel_scheduler"):
            stats = scheduler.run_once()
    finally:
        scheduler.close()
    # Then every ordinary job went, and the pass did not fail (no backoff of the passes)
    assert sorted(sender.sent) == ordinary
    by_script = isinstance(storage, RedisStorage) and isinstance(sender, RedisBroker)
    assert scheduler.releases_by_script is (by_script and mode == "batch")
    assert stats.released == ORDINARY and stats.backed_off == 1
    assert stats.failed == 0 and stats.stopped == 0
    # And the poison job alone is Scheduled again, later, with an error that says why
    poison = storage.get_job(POISON)
    assert poison is not None and poison.state is JobState.SCHEDULED
    reason = sender.reason if isinstance(sender, Refusing) else "do not decode"
    assert poison.last_error is not None and reason in poison.last_error
    assert poison.due_at >= storage.now() + FIRST_SEND_BACKOFF - 2
    assert storage.fetch_due_ids(10) == []
    # And the log names the job and the reason, in words, and blames no chunk
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(
        POISON in line and "cannot be sent" in line and "attempt 1 of 3" in line for line in said
    ), said
    assert not any("handing" in line for line in said), said
    unsendable = registry.get_sample_value(
        PREFIX + "release_errors_total", {"reason": "unsendable"}
    )
    assert unsendable == 1


@pytest.mark.parametrize("mode", ["batch", "per_job"])
def test_after_its_last_attempt_the_poison_job_is_set_aside_as_failed_until_rescheduled(
    storage: Storage, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a poison job beside ordinary ones, and a scheduler allowing three attempts
    recording = Recording()
    ordinary = add_poison_and_ordinary(storage, recording.dispatcher)
    settings = Settings(release_mode=mode, max_send_attempts=ATTEMPTS)
    scheduler = DelayedJobScheduler(storage, recording.dispatcher, settings)
    registry = CollectorRegistry()
    scheduler.metrics = PrometheusRecorder(registry)
    try:
        # When a pass runs each time its backoff is over, three times
        first = scheduler.run_once()
        for attempt in (2, 3):
            poison = storage.get_job(POISON)
            assert poison is not None and poison.state is JobState.SCHEDULED
            assert poison.attempts == attempt - 1
            make_due(storage, POISON)
            with caplog.at_level(logging.ERROR, logger="parallel_scheduler"):
                last = scheduler.run_once()
        # Then it is set aside as failed, with its error, and never due again
        poison = storage.get_job(POISON)
        assert poison is not None and poison.state is JobState.FAILED
        assert poison.attempts == ATTEMPTS
        assert poison.last_error is not None and "do not decode" in poison.last_error
        assert first.backed_off == 1 and last.set_aside == 1 and last.backed_off == 0
        assert storage.fetch_due_ids(10) == [] and storage.next_due_at() is None
        said = [r.getMessage() for r in caplog.records]
        assert any(POISON in line and "set aside as failed" in line for line in said), said
        assert (
            registry.get_sample_value(PREFIX + "release_errors_total", {"reason": "set_aside"}) == 1
        )
        # And the ordinary jobs all went in the first pass, once each
        assert sorted(recording.sent) == ordinary
        # And listings and counts have it
        client = Client(storage)
        assert [job.id for job in client.list(JobState.FAILED)] == [POISON]
        assert client.counts()["failed"] == 1
        # When it is rescheduled
        assert client.reschedule(POISON, countdown=0)
        # Then it is Scheduled and due, its attempts counted afresh
        again = storage.get_job(POISON)
        assert again is not None and again.state is JobState.SCHEDULED and again.attempts == 0
        assert storage.fetch_due_ids(10) == [POISON]
        assert scheduler.run_once().backed_off == 1
    finally:
        scheduler.close()


def test_the_backoff_doubles_per_attempt_up_to_its_cap() -> None:
    assert [send_backoff(n) for n in (1, 2, 3, 4)] == [FIRST_SEND_BACKOFF * k for k in (1, 2, 4, 8)]
    assert send_backoff(50) == send_backoff(10_000) == MAX_SEND_BACKOFF
    assert send_backoff(0) == FIRST_SEND_BACKOFF
