"""Overlap (issue 25, §5 "Overlap") on every adapter: a recurring job with ``overlap="skip"``
fires no tick while an earlier firing of it has not finished; with ``"buffer_one"`` it holds
one such tick (the ticks that come meanwhile collapse into it) and fires it once, under that
tick's id, as soon as nothing runs; a firing whose outcome never comes counts as finished after
``overlap_timeout``. "Finished" is a final execution outcome recorded in storage (as the Celery
plugin records it), or a firing job that is gone, cancelled or expired.

Ticks are driven without sleeping: a minute job is made due at a past tick and each pass plans
at a chosen storage instant (``pass_at``), as the ``max_runs`` tests do."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from parallel_scheduler import Client, InvalidJobError, Settings
from parallel_scheduler.engine.recorder import NullRecorder
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.overlap import RECHECK, running_jobs
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import NewJob, OutcomeEvent, OutcomeState, Storage, list_jobs
from tests.scheduler.test_max_runs import MINUTE, fired_ticks, pass_at

ZONE = "UTC"


def minute_job(client: Client, rid: str = "m", **kw: Any) -> float:
    """A ``* * * * *`` job made due at a whole minute 30 minutes ago (returned)."""
    client.recurring.save(rid, "t.m", "* * * * *", timezone=ZONE, **kw)
    start = math.floor(client.storage.now() / MINUTE) * MINUTE - 30 * MINUTE
    assert client.storage.set_recurring_enabled(rid, True, start)
    return start


def finish(storage: Storage, job_id: str, at: float, state: OutcomeState) -> None:
    """Record what a worker would: the firing ``job_id`` ran and ended in ``state``."""
    storage.record_outcomes(
        [
            OutcomeEvent(job_id, "t.m", OutcomeState.STARTED, at, "w1@box"),
            OutcomeEvent(job_id, "t.m", state, at + 1, "w1@box", runtime=1.0),
        ]
    )


def next_run(client: Client, rid: str = "m") -> float | None:
    job = client.recurring.get(rid)
    assert job is not None and job.problem is None, job
    return None if job.next_run_at is None else job.next_run_at.timestamp()


def test_skip_fires_no_tick_while_the_previous_firing_runs(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a minute job with overlap "skip" whose first tick fired (no outcome yet)
    client = Client(storage)
    start = minute_job(client, overlap="skip")
    assert pass_at(storage, monkeypatch, start + 1).created == 1
    # When its next tick comes while that firing has not finished
    stats = pass_at(storage, monkeypatch, start + MINUTE + 1)
    # Then the tick is skipped: nothing fired, the next run moved past it, nothing in history
    assert (stats.created, stats.skipped, stats.fired) == (0, 1, 1)
    assert next_run(client) == start + 2 * MINUTE
    assert fired_ticks(storage, "m") == [start]
    job = client.recurring.get("m")
    assert job is not None and len(job.recent_firings()) == 1
    # and once the firing has succeeded, the next tick fires
    finish(storage, firing_id("m", start), start + 2, OutcomeState.SUCCEEDED)
    stats = pass_at(storage, monkeypatch, start + 2 * MINUTE + 1)
    assert (stats.created, stats.skipped) == (1, 0)
    assert fired_ticks(storage, "m") == [start, start + 2 * MINUTE]


def test_buffer_one_fires_the_held_tick_once_when_the_firing_finishes(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a minute job with overlap "buffer_one" whose first tick fired (no outcome yet)
    client = Client(storage)
    start = minute_job(client, overlap="buffer_one")
    pass_at(storage, monkeypatch, start + 1)
    # When its next tick comes while that firing runs
    stats = pass_at(storage, monkeypatch, start + MINUTE + 1)
    # Then nothing fires; the job is looked at again RECHECK seconds on (no tick: a held one)
    assert (stats.created, stats.skipped) == (0, 1)
    assert next_run(client) == start + MINUTE + 1 + RECHECK
    # and while the firing still runs, each look only moves the re-check on
    stats = pass_at(storage, monkeypatch, start + MINUTE + 10)
    assert stats.created == 0 and next_run(client) == start + MINUTE + 10 + RECHECK
    # When the firing finishes (failed counts as finished), the held tick fires at the next look
    finish(storage, firing_id("m", start), start + MINUTE + 12, OutcomeState.FAILED)
    stats = pass_at(storage, monkeypatch, start + MINUTE + 20)
    assert stats.created == 1
    assert fired_ticks(storage, "m") == [start, start + MINUTE]
    assert next_run(client) == start + 2 * MINUTE
    job = client.recurring.get("m")
    assert job is not None and job.runs == 2
    assert job.recent_firings()[0].job_id == firing_id("m", start + MINUTE)


def test_buffer_one_collapses_the_ticks_that_come_meanwhile_into_one(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a buffer_one minute job whose first firing runs for three more ticks
    client = Client(storage)
    start = minute_job(client, overlap="buffer_one")
    pass_at(storage, monkeypatch, start + 1)
    held = 0
    for minute in (1, 2, 3):
        stats = pass_at(storage, monkeypatch, start + minute * MINUTE + 1)
        held += stats.skipped
        assert stats.created == 0
    assert held == 3
    # When it finishes, one firing comes: the newest tick's; the held ticks before it never fire
    finish(storage, firing_id("m", start), start + 3 * MINUTE + 2, OutcomeState.SUCCEEDED)
    assert pass_at(storage, monkeypatch, start + 3 * MINUTE + 30).created == 1
    assert fired_ticks(storage, "m") == [start, start + 3 * MINUTE]
    # and a repeated pass over the same instant fires nothing more
    assert pass_at(storage, monkeypatch, start + 4 * MINUTE + 1).created == 0


def test_an_unfinished_firing_counts_as_finished_after_the_overlap_timeout(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given skip and buffer_one jobs with a 90 s overlap timeout whose first firings never end
    client = Client(storage)
    start = minute_job(client, "s", overlap="skip", overlap_timeout=90)
    minute_job(client, "b", overlap="buffer_one", overlap_timeout=90)
    pass_at(storage, monkeypatch, start + 1)
    # When the next tick comes within the timeout, it is held back by both
    stats = pass_at(storage, monkeypatch, start + MINUTE + 1)
    assert (stats.created, stats.skipped) == (0, 2)
    # Then once the timeout has passed without an outcome, both fire again
    assert pass_at(storage, monkeypatch, start + 2 * MINUTE + 1).created == 2
    assert fired_ticks(storage, "s") == [start, start + 2 * MINUTE]
    assert fired_ticks(storage, "b") == [start, start + 2 * MINUTE]


class HeldCounter(NullRecorder):
    """A metrics recorder that keeps what ``overlap_held`` was told, per policy."""

    def __init__(self) -> None:
        self.held: Counter[str] = Counter()

    def overlap_held(self, policy: str, count: int) -> None:
        self.held[policy] += count


def test_held_ticks_are_counted_in_the_metric_per_policy(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a skip and a buffer_one job whose first firings run
    client = Client(storage)
    start = minute_job(client, "s", overlap="skip")
    minute_job(client, "b", overlap="buffer_one")
    pass_at(storage, monkeypatch, start + 1)
    # When a pass meets their next ticks
    scheduler = RecurringJobScheduler(storage, Settings())
    recorder = HeldCounter()
    scheduler.metrics = recorder
    with monkeypatch.context() as patched:
        patched.setattr(scheduler._clock, "now", lambda: start + MINUTE + 1)
        try:
            scheduler.run_once()
        finally:
            scheduler.close()
    # Then each policy's held tick is counted
    assert recorder.held == Counter({"skip": 1, "buffer_one": 1})


def test_allow_fires_every_tick_as_before(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(storage)
    start = minute_job(client)
    job = client.recurring.get("m")
    assert job is not None and job.schedule.overlap == "allow"
    for minute in range(3):
        pass_at(storage, monkeypatch, start + minute * MINUTE + 1)
    assert fired_ticks(storage, "m") == [start, start + MINUTE, start + 2 * MINUTE]


def test_what_counts_as_running(storage: Storage) -> None:
    # Given firings in every state a worker and storage can leave them in
    now = storage.now()
    ids = ["queued", "started", "retried", "ok", "failed", "revoked", "cancelled", "gone"]
    storage.add_jobs([NewJob(f"r@{name}", "t.m", "{}", now) for name in ids if name != "gone"])
    storage.record_outcomes(
        [
            OutcomeEvent("r@started", "t.m", OutcomeState.STARTED, now, "w"),
            OutcomeEvent("r@retried", "t.m", OutcomeState.RETRIED, now, "w", error="E: x"),
            OutcomeEvent("r@ok", "t.m", OutcomeState.SUCCEEDED, now, "w", runtime=1.0),
            OutcomeEvent("r@failed", "t.m", OutcomeState.FAILED, now, "w", error="E: y"),
            OutcomeEvent("r@revoked", "t.m", OutcomeState.REVOKED, now, "w"),
        ]
    )
    assert storage.cancel("r@cancelled")
    # Then running: not yet run, started, retried (it runs again); the others finished
    running = running_jobs(storage, [f"r@{name}" for name in ids])
    assert running == {"r@queued", "r@started", "r@retried"}
    assert len(list_jobs(storage, None, 100)) == 7


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (
            {"overlap": "sometimes"},
            "overlap must be one of allow, skip, buffer_one, not 'sometimes'",
        ),
        ({"overlap": None}, "overlap must be one of allow, skip, buffer_one, not None"),
        ({"overlap": "skip", "overlap_timeout": 0}, "overlap timeout must be from 1 to"),
        ({"overlap": "skip", "overlap_timeout": "x"}, "overlap timeout must be a number"),
    ],
)
def test_the_client_refuses_a_bad_overlap(storage: Storage, kw: Any, words: str) -> None:
    client = Client(storage)
    with pytest.raises(InvalidJobError, match=words):
        client.recurring.save("r", "t.r", "* * * * *", **kw)
    with pytest.raises(InvalidJobError, match=words):
        client.recurring.save_many(
            [
                {"id": "ok", "task": "t.r", "every": 60},
                {"id": "r", "task": "t.r", "every": 60, **kw},
            ]
        )
    assert storage.count_recurring() == 0


def test_overlap_is_refused_when_outcomes_are_not_recorded(storage: Storage) -> None:
    client = Client(storage, settings=Settings(record_outcomes=False))
    for policy in ("skip", "buffer_one"):
        with pytest.raises(InvalidJobError, match="needs execution outcomes, and record_outcomes"):
            client.recurring.save("r", "t.r", "* * * * *", overlap=policy)
    assert storage.count_recurring() == 0
    assert (
        client.recurring.save("r", "t.r", "* * * * *", overlap="allow").schedule.overlap == "allow"
    )
