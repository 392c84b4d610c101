"""``pause_after_failures`` (issue 25, §5) on every adapter: a recurring job with
``pause_after_failures=K`` whose K scheduled ticks before its due tick all fired and all failed
is paused at that tick instead of fired, with a note naming the count and the newest failed
firing, by ``parallel-scheduler``; a success, a firing with no outcome yet, or a tick that did
not fire (a resume) breaks the count. The failures are recorded in storage as the Celery plugin
records them (``record_outcomes``), and ticks are driven at chosen storage instants
(``pass_at``), as the overlap and ``max_runs`` tests do: no sleeping."""

from __future__ import annotations

from typing import Any

import pytest

from parallel_scheduler import Client, InvalidItemError, InvalidJobError, Settings
from parallel_scheduler.engine.recorder import NullRecorder
from parallel_scheduler.recurring.failure_pause import PAUSED_BY, Pause, gate_outcomes
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.misfires import plan_firing
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import OutcomeEvent, OutcomeState, Storage
from tests.scheduler.test_max_runs import MINUTE, fired_ticks, pass_at
from tests.scheduler.test_overlap import finish, minute_job

OK, FAILED = OutcomeState.SUCCEEDED, OutcomeState.FAILED


def fire_ticks(storage: Storage, monkeypatch: pytest.MonkeyPatch, start: float, n: int) -> None:
    """Passes that fire the job's ticks ``start`` .. ``start + (n - 1)`` minutes, one each."""
    for minute in range(n):
        stats = pass_at(storage, monkeypatch, start + minute * MINUTE + 1)
        assert (stats.created, stats.paused) == (1, 0), stats


def outcomes(storage: Storage, start: float, states: list[OutcomeState | None]) -> None:
    """The firing of tick ``start + i`` minutes ends in ``states[i]`` (``None``: no outcome)."""
    for minute, state in enumerate(states):
        if state is not None:
            tick = start + minute * MINUTE
            finish(storage, firing_id("m", tick), tick + 2, state)


def test_k_failed_firings_in_a_row_pause_the_job_at_its_next_tick(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a minute job that pauses after 3 failures, whose first three firings failed
    client = Client(storage)
    start = minute_job(client, pause_after_failures=3)
    fire_ticks(storage, monkeypatch, start, 3)
    outcomes(storage, start, [FAILED, FAILED, FAILED])
    # When its next tick comes
    stats = pass_at(storage, monkeypatch, start + 3 * MINUTE + 1)
    # Then the tick is not fired and the job is paused, saying why and by whom
    assert (stats.created, stats.paused, stats.fired, stats.failed) == (0, 1, 0, 0)
    assert fired_ticks(storage, "m") == [start, start + MINUTE, start + 2 * MINUTE]
    job = client.recurring.get("m")
    assert job is not None and not job.enabled
    last = firing_id("m", start + 2 * MINUTE)
    assert job.pause_note == f"paused after 3 consecutive failed firings (last: {last})"
    assert job.paused_by == PAUSED_BY == "parallel-scheduler"
    assert job.paused_at is not None
    assert job.next_run_at is not None and job.next_run_at.timestamp() == start + 3 * MINUTE
    # and a racing scheduler pausing it again keeps when it was first paused
    first_paused_at = job.paused_at
    assert storage.set_recurring_enabled("m", False, start + 3 * MINUTE, job.pause_note, PAUSED_BY)
    again = client.recurring.get("m")
    assert again is not None and again.paused_at == first_paused_at


def test_a_success_in_between_resets_the_count(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that pauses after 2 failures: failed, succeeded, failed
    client = Client(storage)
    start = minute_job(client, pause_after_failures=2)
    fire_ticks(storage, monkeypatch, start, 3)
    outcomes(storage, start, [FAILED, OK, FAILED])
    # When its next tick comes, it fires: only one failure since the success
    fire_ticks(storage, monkeypatch, start + 3 * MINUTE, 1)
    # Then once that firing fails too, the tick after it pauses the job
    outcomes(storage, start + 3 * MINUTE, [FAILED])
    stats = pass_at(storage, monkeypatch, start + 4 * MINUTE + 1)
    assert (stats.created, stats.paused) == (0, 1)
    job = client.recurring.get("m")
    assert job is not None and not job.enabled
    assert job.pause_note == (
        f"paused after 2 consecutive failed firings (last: {firing_id('m', start + 3 * MINUTE)})"
    )


def test_a_firing_with_no_outcome_yet_is_no_failure_and_a_retried_one_that_failed_is(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that pauses after 2 failures: its first firing failed, its second has no
    # outcome yet (still running)
    client = Client(storage)
    start = minute_job(client, pause_after_failures=2)
    fire_ticks(storage, monkeypatch, start, 2)
    outcomes(storage, start, [FAILED, None])
    # When its next tick comes, it fires
    fire_ticks(storage, monkeypatch, start + 2 * MINUTE, 1)
    # and while the second was retried (not finished), the next tick fires as well
    second = firing_id("m", start + MINUTE)
    storage.record_outcomes([OutcomeEvent(second, "t.m", OutcomeState.RETRIED, start + 70, "w")])
    outcomes(storage, start + 2 * MINUTE, [FAILED])
    fire_ticks(storage, monkeypatch, start + 3 * MINUTE, 1)
    # Then once the retried run failed in the end, and so did the next, the job is paused
    finish(storage, second, start + 80, FAILED)
    outcomes(storage, start + 3 * MINUTE, [FAILED])
    stats = pass_at(storage, monkeypatch, start + 4 * MINUTE + 1)
    assert (stats.created, stats.paused) == (0, 1)
    job = client.recurring.get("m")
    assert job is not None and not job.enabled


def test_a_resumed_job_counts_afresh_and_triggers_do_not_count(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job paused after 2 failures
    client = Client(storage)
    start = minute_job(client, pause_after_failures=2)
    fire_ticks(storage, monkeypatch, start, 2)
    outcomes(storage, start, [FAILED, FAILED])
    assert pass_at(storage, monkeypatch, start + 2 * MINUTE + 1).paused == 1
    # When it is resumed (here at a past tick, to drive it) and a trigger fails meanwhile
    assert client.resume_recurring("m")
    triggered = client.recurring.trigger("m")
    finish(storage, triggered, storage.now(), FAILED)
    assert storage.set_recurring_enabled("m", True, start + 5 * MINUTE)
    # Then its next tick fires: the ticks it was paused at never fired, so the count restarts
    fire_ticks(storage, monkeypatch, start + 5 * MINUTE, 1)
    outcomes(storage, start + 5 * MINUTE, [FAILED])
    # and one more failure (with the failed trigger) is not two in a row: it fires again
    fire_ticks(storage, monkeypatch, start + 6 * MINUTE, 1)
    outcomes(storage, start + 6 * MINUTE, [FAILED])
    assert pass_at(storage, monkeypatch, start + 7 * MINUTE + 1).paused == 1
    job = client.recurring.get("m")
    assert job is not None and not job.enabled


def test_a_job_without_the_setting_never_pauses(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(storage)
    start = minute_job(client)
    fire_ticks(storage, monkeypatch, start, 3)
    outcomes(storage, start, [FAILED, FAILED, FAILED])
    fire_ticks(storage, monkeypatch, start + 3 * MINUTE, 1)
    job = client.recurring.get("m")
    assert job is not None and job.enabled and job.schedule.pause_after_failures is None
    assert "pause_after_failures" not in job.schedule.to_json()  # stored as before


def test_it_works_beside_overlap_and_the_pause_is_counted_in_the_metric(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a skip job that pauses after 1 failure, and a plain one, whose firings failed
    client = Client(storage)
    start = minute_job(client, pause_after_failures=1, overlap="skip")
    minute_job(client, "other", pause_after_failures=1)
    fire_ticks_both = pass_at(storage, monkeypatch, start + 1)
    assert fire_ticks_both.created == 2
    finish(storage, firing_id("m", start), start + 2, FAILED)
    finish(storage, firing_id("other", start), start + 2, OK)
    # When a pass with a metrics recorder meets their next ticks
    scheduler = RecurringJobScheduler(storage, Settings())
    recorder = PauseCounter()
    scheduler.metrics = recorder
    with monkeypatch.context() as patched:
        patched.setattr(scheduler._clock, "now", lambda: start + MINUTE + 1)
        try:
            stats = scheduler.run_once()
        finally:
            scheduler.close()
    # Then the failed one is paused (counted), the other fires
    assert (stats.paused, stats.created) == (1, 1)
    assert recorder.paused == 1
    job = client.recurring.get("m")
    assert job is not None and not job.enabled
    assert job.pause_note == f"paused after 1 failed firing (last: {firing_id('m', start)})"


class PauseCounter(NullRecorder):
    """A metrics recorder that keeps what ``paused_after_failures`` was told."""

    def __init__(self) -> None:
        self.paused = 0

    def paused_after_failures(self, count: int) -> None:
        self.paused += count


BAD_WORDS = "pause after failures must be a whole number from 1 to 20"


@pytest.mark.parametrize("bad", [0, -1, "x", True, 21, 1.5])
def test_the_client_refuses_a_bad_pause_after_failures(storage: Storage, bad: Any) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match=f"{BAD_WORDS}, not {bad!r}"):
        client.recurring.save("r", "t.r", "* * * * *", pause_after_failures=bad)
    with pytest.raises(InvalidItemError, match=BAD_WORDS):
        client.recurring.save_many(
            [
                {"id": "ok", "task": "t.r", "every": 60},
                {"id": "r", "task": "t.r", "every": 60, "pause_after_failures": bad},
            ]
        )
    assert storage.count_recurring() == 0


def test_it_is_refused_when_outcomes_are_not_recorded(storage: Storage) -> None:
    client = Client(storage, settings=Settings(record_outcomes=False))
    words = "pause_after_failures=3 needs execution outcomes, and record_outcomes is off"
    with pytest.raises(InvalidJobError, match=words):
        client.recurring.save("r", "t.r", "* * * * *", pause_after_failures=3)
    assert storage.count_recurring() == 0
    assert client.recurring.save("r", "t.r", "* * * * *").schedule.pause_after_failures is None


class CountingReads:
    """A real store, with its ``latest_outcomes`` calls counted (everything else passed on)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.reads = 0

    def latest_outcomes(self, job_ids: Any) -> Any:
        self.reads += 1
        return self.storage.latest_outcomes(job_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)


def test_overlap_and_the_failure_count_share_one_outcome_read(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two skip jobs that pause after 2 failures: m's two firings failed, o's newest runs
    client = Client(storage)
    start = minute_job(client, pause_after_failures=2, overlap="skip")
    minute_job(client, "o", pause_after_failures=2, overlap="skip")
    assert pass_at(storage, monkeypatch, start + 1).created == 2
    finish(storage, firing_id("m", start), start + 2, FAILED)
    finish(storage, firing_id("o", start), start + 2, OK)
    assert pass_at(storage, monkeypatch, start + MINUTE + 1).created == 2
    finish(storage, firing_id("m", start + MINUTE), start + MINUTE + 2, FAILED)
    # When their next ticks are planned
    now = start + 2 * MINUTE + 1
    staged = []
    for record in storage.fetch_due_recurring(10):
        schedule = Schedule.from_json(record.schedule)
        assert record.next_run_at is not None
        staged.append((record, schedule, plan_firing(schedule, record.next_run_at, now, None)))
    counted = CountingReads(storage)
    store: Any = counted  # a real store behind it: gate_outcomes sees a Storage
    decided = gate_outcomes(store, staged, now, None)
    gates = {record.id: gate for (record, _, _), gate in zip(staged, decided, strict=True)}
    # Then one outcome read served both: m is paused, o's tick skipped while its firing runs
    assert counted.reads == 1
    assert isinstance(gates["m"], Pause)
    skipped = gates["o"]
    assert not isinstance(skipped, Pause)
    plan, held_back = skipped
    assert (plan.ticks, held_back) == ([], 1)
