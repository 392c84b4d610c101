"""DelayedJobScheduler over every adapter, with a recording dispatcher in place of a broker."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import (
    CallableDispatcher,
    Client,
    DelayedJobScheduler,
    JobSpec,
    JobState,
    Outcome,
    Settings,
)
from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.paths import chunk_for
from parallel_scheduler.delayed.sending import Releaser
from parallel_scheduler.process.service import SchedulerService
from storage_adapters import ClaimedJob, Storage
from tests.conftest import POSTGRESQL_URL, require_server, unique_prefix
from tests.recording_dispatcher import Recorder


def make_scheduler(storage: Storage, recorder: Recorder, **settings: Any) -> DelayedJobScheduler:
    return DelayedJobScheduler(storage, CallableDispatcher(recorder), Settings(**settings))


def schedule(storage: Storage, specs: Sequence[JobSpec]) -> list[str]:
    return [r.job_id for r in Client(storage).schedule_many(specs)]


def due_jobs(storage: Storage, count: int) -> list[str]:
    return schedule(storage, [JobSpec("tasks.add", args=[i, i]) for i in range(count)])


@pytest.mark.parametrize("release_mode", ["per_job", "batch"])
@pytest.mark.parametrize("parallelism", [1, 8])
def test_a_pass_releases_every_due_job_once(
    storage: Storage, release_mode: str, parallelism: int
) -> None:
    # Given 250 due jobs and 5 that are not due yet
    due = due_jobs(storage, 250)
    schedule(storage, [JobSpec("tasks.later", countdown=3600) for _ in range(5)])
    recorder = Recorder()
    scheduler = make_scheduler(
        storage,
        recorder,
        release_mode=release_mode,
        max_degree_of_parallelism=parallelism,
        batch_size=100,
    )
    # When one pass runs
    stats = scheduler.run_once()
    scheduler.close()
    # Then every due job was sent once, in full batches and one partial one, and none early
    assert sorted(recorder.ids) == sorted(due)
    assert (stats.released, stats.fetched, stats.batches) == (250, 250, 3)
    counts = storage.count_by_state()
    assert (counts[JobState.ENQUEUED], counts[JobState.SCHEDULED]) == (250, 5)
    assert storage.lock_holder(DelayedJobScheduler.LOCK_NAME) is None


def test_arguments_and_routing_options_reach_the_dispatcher(storage: Storage) -> None:
    (job_id,) = schedule(
        storage,
        [
            JobSpec(
                "tasks.mail",
                args=[1, "ü"],
                kwargs={"to": "a@b"},
                options={"queue": "mail", "priority": 7},
            )
        ],
    )
    recorder = Recorder()
    make_scheduler(storage, recorder).run_once()
    assert recorder.sent == [
        (job_id, "tasks.mail", [1, "ü"], {"to": "a@b"}, {"queue": "mail", "priority": 7})
    ]


def test_nothing_happens_while_another_scheduler_holds_the_lock(storage: Storage) -> None:
    due_jobs(storage, 3)
    assert storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "someone-else", 30) is not None
    recorder = Recorder()
    stats = make_scheduler(storage, recorder).run_once()
    assert not stats.lock_acquired
    assert recorder.sent == []
    assert storage.count_by_state()[JobState.SCHEDULED] == 3


@pytest.mark.parametrize("release_mode", ["per_job", "batch"])
def test_a_broker_outage_leaves_jobs_scheduled_and_never_enqueued(
    storage: Storage, release_mode: str
) -> None:
    # Given a dispatcher that sends 4 jobs and then fails
    due = due_jobs(storage, 20)
    recorder = Recorder(fail_after=4)
    scheduler = make_scheduler(
        storage, recorder, release_mode=release_mode, max_degree_of_parallelism=1
    )
    # When a pass runs into the outage
    stats = scheduler.run_once()
    # Then exactly the sent jobs are Enqueued; the rest stay Scheduled with the error recorded
    counts = storage.count_by_state()
    assert counts[JobState.ENQUEUED] == len(recorder.ids) == 4
    assert counts[JobState.SCHEDULED] == 16
    assert stats.failed >= 1
    unsent = [storage.get_job(i) for i in due if i not in recorder.ids]
    assert all(r is not None and r.state is JobState.SCHEDULED for r in unsent)
    errors = [r.last_error for r in unsent if r is not None and r.last_error]
    assert errors and all("broker unreachable" in e for e in errors)
    # And once the broker is back, the next pass sends the rest, each once
    recorder.fail_after = None
    scheduler.run_once()
    scheduler.close()
    assert sorted(recorder.ids) == sorted(due)
    assert storage.count_by_state()[JobState.ENQUEUED] == 20


def test_expired_jobs_are_not_sent(storage: Storage) -> None:
    now = storage.now()
    (expired, live) = schedule(
        storage,
        [JobSpec("tasks.a", options={"expires": now - 1}), JobSpec("tasks.b")],
    )
    recorder = Recorder()
    stats = make_scheduler(storage, recorder).run_once()
    assert recorder.ids == [live]
    assert stats.expired == 1
    record = storage.get_job(expired)
    assert record is not None and record.state is JobState.EXPIRED


def test_claims_of_a_dead_scheduler_are_recovered(storage: Storage) -> None:
    # Given a job claimed by a scheduler that died before sending it
    (job_id,) = due_jobs(storage, 1)
    dead = storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "dead", 0.3)
    assert dead is not None
    assert storage.claim(job_id, dead, lease=0.3) is not None
    # When the next scheduler passes after the lease ran out
    recorder = Recorder()
    scheduler = make_scheduler(storage, recorder)
    wait_until(lambda: scheduler.run_once().released == 1, timeout=10)
    # Then the job was sent once
    assert recorder.ids == [job_id]


def test_run_forever_wakes_for_the_next_due_job_and_stops_cleanly(storage: Storage) -> None:
    # Given a scheduler whose poll interval is far longer than the wait for the next job
    recorder = Recorder()
    scheduler = make_scheduler(storage, recorder, poll_interval=60)
    schedule(storage, [JobSpec("tasks.soon", countdown=0.5)])
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    try:
        # Then it sleeps only until that job is due, not a whole poll interval
        wait_until(lambda: recorder.ids, timeout=10)
    finally:
        scheduler.stop()
        thread.join(timeout=10)
    scheduler.close()
    assert not thread.is_alive()
    assert storage.lock_holder(DelayedJobScheduler.LOCK_NAME) is None


def test_release_listeners_see_each_sent_job(storage: Storage) -> None:
    due = due_jobs(storage, 10)
    seen: Counter[str] = Counter()

    def listen(job: ClaimedJob, sent_at: float) -> None:
        assert sent_at >= job.due_at
        seen[job.id] += 1

    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(Recorder()), Settings(), listeners=[listen]
    )
    scheduler.run_once()
    assert seen == Counter(due)


class LeaseRunningOut:
    """A held lock whose local lease check says yes ``checks`` times, then no: what a holder
    frozen mid-batch (SIGSTOP, a long GC pause) sees when it wakes up."""

    def __init__(self, lease: Any, checks: int) -> None:
        self.lease = lease
        self._left = checks

    def valid(self) -> bool:
        self._left -= 1
        return self._left >= 0


def test_a_batch_stops_sending_when_the_lease_runs_out_mid_way(storage: Storage) -> None:
    # Given 10 claimed jobs and a lease that runs out after the first few sends
    due_jobs(storage, 10)
    lease = storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "holder", 30)
    assert lease is not None
    claims = storage.claim_due(10, lease, 30)
    recorder = Recorder()
    releaser = Releaser(storage, CallableDispatcher(recorder), StorageClock(storage), 30)
    # When the batch is released (1 check before sending, then 1 before each job)
    lock = LeaseRunningOut(lease, 4)
    outcomes = releaser.release_claims(claims, lock, time.monotonic())  # type: ignore[arg-type]
    # Then only 3 were sent; the rest went back to Scheduled, stopped rather than failed
    assert len(recorder.ids) == 3
    assert outcomes[Outcome.RELEASED] == 3
    assert outcomes[Outcome.STOPPED] == 7
    assert outcomes[Outcome.FAILED] == 0
    assert not releaser.halted
    assert storage.count_by_state()[JobState.SCHEDULED] == 7


def test_batch_mode_marks_each_chunk_before_its_thread_sends_the_next(storage: Storage) -> None:
    """What a crash or a stall can send twice is what was sent and not yet marked: at most one
    chunk per pool thread, because each thread marks its chunk before it sends the next."""
    # Given a due batch four times what two threads would send as one chunk each (the chunk of
    # this storage: larger where a chunk is one transaction)
    chunk = chunk_for(storage)
    due = due_jobs(storage, 8 * chunk)
    sent_by: dict[str, list[str]] = {}
    unmarked_too_long: list[tuple[str, str]] = []

    def send(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        mine = sent_by.setdefault(threading.current_thread().name, [])
        if len(mine) >= chunk:  # a whole chunk ago: that send must be marked by now
            earlier = storage.get_job(mine[-chunk])
            if earlier is None or earlier.state is not JobState.ENQUEUED:
                unmarked_too_long.append((mine[-chunk], job_id))
        mine.append(job_id)

    scheduler = DelayedJobScheduler(
        storage,
        CallableDispatcher(send),
        Settings(release_mode="batch", max_degree_of_parallelism=2, batch_size=8 * chunk),
    )
    # When one pass releases it
    stats = scheduler.run_once()
    scheduler.close()
    # Then every job went once, and no thread sent a job while one it had sent a chunk earlier
    # was still unmarked
    assert stats.released == len(due)
    assert sorted(i for ids in sent_by.values() for i in ids) == sorted(due)
    assert len(sent_by) == 2
    assert unmarked_too_long == []


class AlwaysHeld:
    """A held lock whose local check always says yes: a holder that does not notice a stall."""

    def __init__(self, lease: Any) -> None:
        self.lease = lease

    def valid(self) -> bool:
        return True


def test_a_mark_refused_after_a_stall_is_reported_by_when_the_send_started(
    storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    # Given three jobs claimed under a short claim lease
    ids = due_jobs(storage, 3)
    claim_lease = 0.5
    lease = storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "stalls", 30)
    assert lease is not None
    claimed_at = time.monotonic()
    claims = storage.claim_due(3, lease, claim_lease)
    first = claims[0].id
    sent: list[str] = []

    # And a process that, right after handing the first job over, stalls past the claims'
    # lease while another scheduler recovers them
    def send(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        sent.append(job_id)
        if job_id == first:
            wait_until(lambda: storage.recover_expired_claims() > 0, timeout=10)

    releaser = Releaser(storage, CallableDispatcher(send), StorageClock(storage), claim_lease)
    # When it resumes, sends the other two and tries to mark all three
    with caplog.at_level(logging.WARNING, logger="parallel_scheduler.delayed.sending"):
        outcomes = releaser.release_claims(claims, AlwaysHeld(lease), claimed_at)  # type: ignore[arg-type]
    # Then none is marked, and each is reported for what happened to it: the first was sent
    # in time and only its mark came late; the other two were sent after their claim expired
    assert sorted(sent) == sorted(ids)
    assert outcomes[Outcome.FENCED] == 3
    in_time = [
        r.getMessage()
        for r in caplog.records
        if "whose send started while their claim was valid" in r.message
    ]
    late = [r.getMessage() for r in caplog.records if "after its claim expired" in r.message]
    assert len(in_time) == 1 and in_time[0].startswith("1 job(s)") and first in in_time[0]
    assert sorted(m.split()[1] for m in late) == sorted(set(ids) - {first})


@pytest.mark.parametrize("adapter_kind", ["sqlite"], indirect=True)
def test_a_waiting_scheduler_tries_the_lock_again_within_a_lease(storage: Storage) -> None:
    """A poll interval longer than the lease must not delay a take-over past the lease."""
    # Given a holder that died holding the lock, and a due job
    lease = 1.0
    assert storage.acquire_lock(DelayedJobScheduler.LOCK_NAME, "dead", lease) is not None
    died_at = time.monotonic()
    due = due_jobs(storage, 1)
    recorder = Recorder()
    scheduler = make_scheduler(storage, recorder, poll_interval=60, lock_lease=lease)
    # When a scheduler with a one-minute poll interval starts waiting for the lock
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    try:
        # Then it takes over and releases the job within a lease, a retry and some slack
        wait_until(lambda: recorder.ids == due, timeout=lease + lease + 3)
        assert time.monotonic() - died_at >= lease * 0.9  # not before the dead lease ran out
    finally:
        scheduler.stop()
        thread.join(timeout=10)
        scheduler.close()


@pytest.mark.slow
@pytest.mark.parametrize("adapter_kind", ["sqlite"], indirect=True)
def test_back_off_after_failing_passes_stays_within_a_lease(storage: Storage) -> None:
    """A scheduler whose passes keep failing still comes back at least once per lease, so it
    releases soon after the failure ends (and takes the lock over in time if another died)."""
    # Given a due job and a broker that refuses every send for 8 s
    lease = 1.0
    outage = 8.0
    due = due_jobs(storage, 1)
    broker_back_at = time.monotonic() + outage
    sent: list[str] = []

    def send(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        if time.monotonic() < broker_back_at:
            raise ConnectionError("broker unreachable")
        sent.append(job_id)

    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(send), Settings(lock_lease=lease, poll_interval=0.05)
    )
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    try:
        # Then the job goes within a lease of the broker's return (with slack for a busy
        # machine), not after a back-off grown to 30 s (8 s here: 0.5, 1, 2, 4, then 8)
        wait_until(lambda: sent == due, timeout=outage + lease + 2.5)
    finally:
        scheduler.stop()
        thread.join(timeout=10)
        scheduler.close()


@pytest.mark.parametrize("adapter_kind", ["sqlite"], indirect=True)
def test_service_stop_waits_for_a_pass_that_outlasts_the_lease(storage: Storage) -> None:
    """``stop()`` returns once the work in flight is done and the locks are free, even when a
    slow send keeps the pass going for longer than a lock lease (renewed meanwhile)."""
    # Given a service whose broker takes 2.5 leases to take one job
    lease = 1.0
    due = due_jobs(storage, 1)
    sending = threading.Event()
    sent: list[str] = []

    def send(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        sending.set()
        time.sleep(2.5 * lease)  # a slow broker round trip, not a wait for a condition
        sent.append(job_id)

    service = SchedulerService.build(
        storage, CallableDispatcher(send), Settings(lock_lease=lease, poll_interval=0.05)
    )
    service.start()
    try:
        # When it is stopped while that send is under way
        assert sending.wait(timeout=10)
        service.stop()
        # Then the send finished, the job is marked, and the lock is free when stop returns
        assert sent == due
        job = storage.get_job(due[0])
        assert job is not None and job.state is JobState.ENQUEUED
        assert storage.lock_holder(DelayedJobScheduler.LOCK_NAME) is None
    finally:
        service.close()


class CountingPasses(DelayedJobScheduler):
    """Counts the passes the loop runs, with the time each began."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.began: list[float] = []

    def run_once(self) -> Any:
        self.began.append(time.monotonic())
        return super().run_once()


@pytest.mark.postgresql
def test_due_jobs_held_by_a_stalled_transaction_do_not_make_the_loop_spin(tmp_path: Any) -> None:
    """A holder frozen inside a storage transaction keeps its rows locked until it resumes or
    dies; the next holder cannot claim them, and must not retry a pass at once, again and again,
    while they stay due: it waits a poll interval between passes."""
    require_server("postgresql")
    storage = storage_adapters.from_url(POSTGRESQL_URL, prefix=unique_prefix())
    storage.setup()
    (job_id,) = due_jobs(storage, 1)
    # Given a due job whose row a stalled process's open transaction holds locked
    stalled = psycopg.connect(POSTGRESQL_URL.replace("+psycopg", ""), autocommit=False)
    table = f"{storage._prefix}_jobs"  # type: ignore[attr-defined]
    stalled.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", (job_id,))
    poll = 0.3
    scheduler = CountingPasses(
        storage, CallableDispatcher(Recorder()), Settings(release_mode="batch", poll_interval=poll)
    )
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    try:
        # When a scheduler runs passes meanwhile
        thread.start()
        wait_until(lambda: len(scheduler.began) >= 5, timeout=10)
        # Then it waited about a poll interval between them (it did not spin)
        began = list(scheduler.began)[:5]
        gaps = [b - a for a, b in itertools.pairwise(began)]
        assert min(gaps) >= poll * 0.8, gaps
        # And once the stalled transaction ends, the job goes out
        stalled.rollback()
        wait_until(lambda: storage.count_by_state()[JobState.ENQUEUED] == 1, timeout=10)
    finally:
        stalled.close()
        scheduler.stop()
        thread.join(timeout=10)
        scheduler.close()
        storage.drop()
        storage.close()
