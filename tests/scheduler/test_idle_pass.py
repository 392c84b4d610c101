"""An idle pass costs one storage round trip, over every adapter on its real server.

With nothing due, a scheduler pass only peeks when work is next due (``next_work_at`` for
delayed jobs, the due recurring read for recurring ones): no lock, no claim recovery, no fetch,
no clock read, and the sleep after it reuses the peek. Due jobs, claims whose lease ran out and
retention still bring a full pass. Storage calls are counted by a thin wrapper around the real
storage object; on Redis the commands that reach the wire are counted as well.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, cast

import pytest
import redis

from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, Client, JobSpec, Settings
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.engine.stats import PassStats
from parallel_scheduler.recurring.planning_ahead import PLAN_AHEAD
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import JobState, NewJob, Storage
from storage_adapters.redis.storage import RedisStorage

HOUR = 3600.0
LOCK = DelayedJobScheduler.LOCK_NAME


class CountingStorage:
    """A real storage whose every public method call is recorded by name, in call order."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self._guard = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name.startswith("_") or not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._guard:
                self.calls.append(name)
            return found(*args, **kwargs)

        return counted


@pytest.fixture
def counting(storage: Storage) -> CountingStorage:
    return CountingStorage(storage)


def sent_to(sent: list[str]) -> CallableDispatcher:
    return CallableDispatcher(lambda task, args, kwargs, options, job_id: sent.append(job_id))


def delayed(counting: CountingStorage, sent: list[str], **settings: Any) -> DelayedJobScheduler:
    """A delayed scheduler on the counting storage; retention off unless asked for."""
    settings.setdefault("retention", None)
    return DelayedJobScheduler(cast(Storage, counting), sent_to(sent), Settings(**settings))


@pytest.fixture
def wire_sends(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """On Redis, how many times a request went out on a connection (a pipeline or a script
    is one); empty elsewhere."""
    sends: list[int] = []
    if isinstance(storage, RedisStorage):
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(self: Any, command: Any, check_health: bool = True) -> None:
            sends.append(1)
            original(self, command, check_health)  # type: ignore[no-untyped-call]

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    yield sends


def test_an_idle_delayed_pass_costs_one_storage_call(
    storage: Storage, counting: CountingStorage, wire_sends: list[int]
) -> None:
    # Given a store whose jobs are a released one, a cancelled one (both due long ago), and one
    # due in half a minute; and a scheduler whose clock is set (its first pass released one)
    client = Client(storage)
    (sent_id, cancelled_id) = [r.job_id for r in client.schedule_many([JobSpec("t.a")] * 2)]
    assert storage.cancel(cancelled_id)
    sent: list[str] = []
    scheduler = delayed(counting, sent, poll_interval=60)
    try:
        assert scheduler.run_once().released == 1 and sent == [sent_id]
        soon = storage.now() + 30
        storage.add_jobs([NewJob(id="soon", task="t.s", payload="{}", due_at=soon)])
        counting.calls.clear()
        wire_sends.clear()
        # When the next pass runs, and the loop works out its sleep
        stats = scheduler.run_once()
        delay = scheduler._delay_after(stats)
        # Then it was one storage call, the peek, and (on Redis) one request on the wire
        assert counting.calls == ["next_work_at"]
        if isinstance(storage, RedisStorage):
            assert len(wire_sends) == 1
        # And the pass says it was idle, without the lock, and nobody holds the lock
        assert stats.idle and not stats.lock_acquired and stats.released == 0
        assert scheduler.held is None and storage.lock_holder(LOCK) is None
        # And the sleep ends when the peeked job falls due, not a whole poll interval later
        assert 20 < delay <= 30.05  # the clock is read twice, microseconds apart
        # And the liveness record sees an idle pass that just ended, not an old one
        assert scheduler.last_pass is not None and scheduler.last_pass[1] is stats
    finally:
        scheduler.close()


def test_a_pass_with_a_due_job_releases_it_without_reading_the_clock(
    storage: Storage, counting: CountingStorage
) -> None:
    # Given a scheduler that has idled once, and whose clock was measured (once, at first use)
    sent: list[str] = []
    scheduler = delayed(counting, sent)
    try:
        assert scheduler.run_once().idle
        scheduler._clock.now()
        # When a job falls due and the next pass runs
        (job_id,) = [r.job_id for r in Client(storage).schedule_many([JobSpec("t.d")])]
        counting.calls.clear()
        stats = scheduler.run_once()
        # Then the pass peeked, took the lock, recovered claims, and released the job
        assert not stats.idle and stats.lock_acquired and stats.released == 1
        assert sent == [job_id]
        assert counting.calls[:4] == [
            "next_work_at",
            "acquire_lock",
            "list_rate_limits",  # the limits in force, read once a pass
            "recover_expired_claims",
        ]
        assert counting.calls[-1] == "release_lock"
        # And it asked storage for its clock not once: the clock refreshes itself
        assert "now" not in counting.calls
        record = storage.get_job(job_id)
        assert record is not None and record.state is JobState.ENQUEUED
    finally:
        scheduler.close()


def claim_and_stall(storage: Storage, lease: float) -> str:
    """A due job claimed under ``lease`` by another scheduler that then stalls: the lock is
    free again, the claim stays until its lease runs out and a pass recovers it."""
    (job_id,) = [r.job_id for r in Client(storage).schedule_many([JobSpec("t.c")])]
    lock = storage.acquire_lock(LOCK, "stalled", 30)
    assert lock is not None
    assert storage.claim(job_id, lock, lease) is not None
    assert storage.release_lock(lock)
    return job_id


def test_a_claim_whose_lease_ran_out_brings_a_full_pass(
    storage: Storage, counting: CountingStorage
) -> None:
    # Given a claim that runs out in two seconds, nothing else, and a long poll interval
    job_id = claim_and_stall(storage, lease=2.0)
    sent: list[str] = []
    scheduler = delayed(counting, sent, poll_interval=60)
    try:
        # When a pass runs while the claim is live
        first = scheduler.run_once()
        # Then it is idle, and the loop would sleep only until the lease ends
        assert first.idle and first.recovered == 0
        assert 0 <= scheduler._delay_after(first) <= 2.0
        # And once the lease ran out, a pass recovers the claim and releases the job
        passes: list[PassStats] = []

        def released() -> bool:
            passes.append(scheduler.run_once())
            return passes[-1].released == 1

        wait_until(released, timeout=15, interval=0.05)
        assert passes[-1].recovered == 1 and passes[-1].lock_acquired
        assert sent == [job_id]
    finally:
        scheduler.close()


def test_the_loop_wakes_when_a_claim_lease_runs_out(storage: Storage) -> None:
    # Given a claim that runs out in a second, and a loop whose poll interval is a minute
    job_id = claim_and_stall(storage, lease=1.0)
    sent: list[str] = []
    scheduler = delayed(CountingStorage(storage), sent, poll_interval=60)
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
    )
    thread.start()
    try:
        # Then the job goes out seconds later: the idle sleep ended with the lease
        wait_until(lambda: sent, timeout=15)
        assert sent == [job_id]
    finally:
        scheduler.stop()
        thread.join(timeout=10)
        scheduler.close()
    assert not thread.is_alive()


def test_an_idle_pass_leaves_old_finished_jobs_to_the_purger(
    storage: Storage, counting: CountingStorage
) -> None:
    # Given an empty store but for a job released by another scheduler a while ago
    (job_id,) = [r.job_id for r in Client(storage).schedule_many([JobSpec("t.r")])]
    lock = storage.acquire_lock(LOCK, "other", 30)
    assert lock is not None
    claims = storage.claim_due(10, lock, 30)
    assert storage.mark_enqueued(claims) == [job_id] and storage.release_lock(lock)
    record = storage.get_job(job_id)
    assert record is not None
    retention = 0.3
    wait_until(lambda: storage.now() > record.updated_at + retention, timeout=10)
    scheduler = delayed(counting, [], retention=retention)
    try:
        scheduler._clock.now()
        counting.calls.clear()
        # When a pass runs with nothing due, Then it is idle at one storage call: purging is
        # not a pass's work
        assert scheduler.run_once().idle and counting.calls == ["next_work_at"]
        assert storage.get_job(job_id) is not None
        # And the purger, running beside the passes, deletes the old job
        scheduler.purger.start()
        wait_until(lambda: storage.get_job(job_id) is None, timeout=10)
    finally:
        scheduler.close()


def test_an_idle_recurring_pass_costs_one_storage_call(
    storage: Storage, counting: CountingStorage, wire_sends: list[int]
) -> None:
    # Given an hourly job whose next run is in the future, and a scheduler whose clock is set
    client = Client(storage)
    client.recurring.save("hourly", "tasks.report", "0 * * * *")
    scheduler = RecurringJobScheduler(cast(Storage, counting), Settings())
    try:
        scheduler._clock.now()
        counting.calls.clear()
        wire_sends.clear()
        # When a pass runs
        stats = scheduler.run_once()
        # Then it read when the next recurring job falls due, once, and did nothing else
        assert counting.calls == ["next_recurring_at"]
        if isinstance(storage, RedisStorage):
            assert len(wire_sends) == 1
        assert stats.idle and not stats.lock_acquired and stats.fired == 0
        # And once the job is due, the next pass fires it
        assert storage.set_recurring_enabled("hourly", True, storage.now() - HOUR)
        fired = scheduler.run_once()
        assert not fired.idle and fired.lock_acquired and fired.created == 1
    finally:
        scheduler.close()


def test_an_idle_recurring_loop_sleeps_until_the_next_tick_not_a_poll_past_it(
    storage: Storage,
) -> None:
    # Given a recurring job whose first tick is 30 s away, and a poll interval of 10 minutes
    tick = datetime.fromtimestamp(storage.now() + 30, tz=timezone.utc)
    Client(storage).recurring.save("soon", "tasks.report", every=3600, start=tick)
    scheduler = RecurringJobScheduler(storage, Settings(poll_interval=600))
    try:
        # When an idle pass runs
        stats = scheduler.run_once()
        assert stats.idle and stats.fired == 0
        # Then the loop sleeps until PLAN_AHEAD before the tick, not the whole poll interval
        assert 0.0 < scheduler._delay_after(stats) <= 30.0 - PLAN_AHEAD
    finally:
        scheduler.close()


def test_a_recurring_loop_plans_a_tick_within_plan_ahead_then_sleeps_until_it(
    storage: Storage,
) -> None:
    # Given a recurring job whose first tick is 4 s away, and a poll interval of 10 minutes
    tick = datetime.fromtimestamp(storage.now() + 4, tz=timezone.utc)
    Client(storage).recurring.save("soon", "tasks.report", every=3600, start=tick)
    scheduler = RecurringJobScheduler(storage, Settings(poll_interval=600))
    try:
        # When a pass runs: it plans the tick, fires nothing
        stats = scheduler.run_once()
        assert (stats.idle, stats.planned, stats.fired) == (False, 1, 0)
        # Then the loop sleeps until the tick; a pass meanwhile is idle (the plan is made)
        assert 0.0 < scheduler._delay_after(stats) <= 4.0
        assert scheduler.run_once().idle
    finally:
        scheduler.close()


def test_a_pass_that_moved_work_and_left_some_due_is_followed_at_once(storage: Storage) -> None:
    # Given five due jobs and a pass that stops after its first batch of two with the rest
    # still due (here its shard is handed away mid-pass; a lease or time budget does the same)
    Client(storage).schedule_many([JobSpec("t.a")] * 5)
    sent: list[str] = []
    serving = [True]

    def send(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        sent.append(job_id)
        serving[0] = False

    settings = Settings(poll_interval=60, batch_size=2, release_mode="per_job", retention=None)
    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(send), settings, serving=lambda: serving[0]
    )
    try:
        stats = scheduler.run_once()
        assert stats.released == 2 and stats.batches == 1
        assert storage.next_work_at() is not None  # three are still due
        # Then the next pass starts at once, not a poll interval (60 s) later
        assert scheduler._delay_after(stats) == 0.0
        # And a pass that moves nothing while work is due waits a poll interval (no spinning)
        assert scheduler._delay_after(PassStats(lock_acquired=True)) == 60
    finally:
        scheduler.close()
