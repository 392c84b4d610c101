"""Pauses on Redis beyond the contract: the sweep of a big due set runs in chunks and stays
complete while a claimer races it, the one-script release and the firing onto lists never push a
held job, and a claim script that meets a job of a paused name before the sweep does holds it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis

from storage_adapters import (
    Firing,
    JobQuery,
    JobState,
    NewJob,
    PauseKind,
    PlannedFiring,
    walk_jobs,
)
from storage_adapters.redis import pauses as pauses_module
from storage_adapters.redis.storage import RedisStorage
from tests.storage import test_redis_specific as base
from tests.storage.test_redis_specific import LOCK, _list_broker, recurring

pytestmark = pytest.mark.redis

# the Redis store's fixtures, shared with the other Redis-only tests
raw, prefix, store = base.raw, base.prefix, base.store

PAUSED, OTHER = "tasks.paused", "tasks.other"
TASK = PauseKind.TASK


def count_scripts(
    monkeypatch: pytest.MonkeyPatch, store: RedisStorage, name: str
) -> Callable[[], int]:
    """How many times ``store`` has run script ``name`` from now on (each run still goes to the
    server: the count is only read on the way)."""
    calls = [0]
    real = store._run

    def counted(script: str, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        if script == name:
            calls[0] += 1
        return real(script, keys, args)

    monkeypatch.setattr(store, "_run", counted)
    return lambda: calls[0]


def held_ids(store: RedisStorage) -> list[str]:
    return [record.id for record in walk_jobs(store, JobQuery(state=JobState.HELD))]


def pause_by_hand(raw: redis.Redis, prefix: str, task: str) -> None:
    """A pause in force whose sweep has not yet reached the due set (as while ``pause`` is still
    sweeping a big one): the record alone, written as ``put_pause.lua`` writes it."""
    raw.hset(f"{{{prefix}}}:pauses", f"task:{task}", '1 ["", ""]')


def test_a_pause_of_30000_due_jobs_sweeps_in_chunks_and_loses_none_to_a_racing_claimer(
    store: RedisStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 30,000 due jobs of a task interleaved with 30,000 of another, in groups of 1,000
    # sharing one due time (so the sweep's position often falls inside a group of equal scores)
    monkeypatch.setattr(pauses_module, "SWEEP_CHUNK", 700)
    sweeps = count_scripts(monkeypatch, store, "move_paused")
    now = store.now()
    jobs = [
        NewJob(f"j{n:05d}", PAUSED if n % 2 else OTHER, "{}", now - 100 + n // 1000)
        for n in range(60_000)
    ]
    for start in range(0, len(jobs), 10_000):
        store.add_jobs(jobs[start : start + 10_000])
    lock = store.acquire_lock(LOCK, "claimer", 300)
    assert lock is not None
    # And a claimer taking due jobs in a loop on the same store
    claimed: list[str] = []
    calls = [0]
    first_claims, stop = threading.Event(), threading.Event()

    def claim_until_drained() -> None:
        while True:
            batch = store.claim_due(200, lock, 300)
            claimed.extend(job.id for job in batch)
            calls[0] += 1
            first_claims.set()
            if not batch and stop.is_set():
                return

    claimer = threading.Thread(target=claim_until_drained)
    claimer.start()
    try:
        assert first_claims.wait(30)
        # When the task is paused while the claimer runs
        before = calls[0]
        swept = store.pause(TASK, PAUSED, "", "")
        during = calls[0] - before
        # Then no job of the task is left scheduled once the pause returns
        assert list(walk_jobs(store, JobQuery(state=JobState.SCHEDULED, task=PAUSED))) == []
    finally:
        stop.set()
        claimer.join()
    # and the sweep took many scripts of at most SWEEP_CHUNK members, the claimer's calls
    # going through between them
    assert swept > 10 * 700
    assert sweeps() >= swept / 700
    assert during > 0
    # and every job is held or was claimed, exactly once
    held = held_ids(store)
    assert len(claimed) == len(set(claimed))
    assert not set(claimed) & set(held)
    assert set(claimed) | set(held) == {job.id for job in jobs}
    assert {job.id for job in jobs if job.task == OTHER} <= set(claimed)
    assert swept <= len(held)  # the claimer may have held a few itself, before the sweep
    counts = store.count_by_state()
    assert (counts[JobState.SCHEDULED], counts[JobState.HELD]) == (0, len(held))
    # And resuming gives every held job back, earliest first
    assert store.resume(TASK, PAUSED) == len(held)
    assert store.fetch_due_ids(len(held)) == sorted(held)


def test_release_to_lists_never_pushes_a_held_job_and_holds_one_the_sweep_missed(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given enveloped due jobs of two tasks; one task paused, then a second paused by a pause
    # whose sweep has not reached its jobs yet
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    now = store.now()
    store.add_jobs(
        [
            NewJob("p", PAUSED, "{}", now - 3, f"{queue}\nmessage-p"),
            NewJob("m", "tasks.missed", "{}", now - 2, f"{queue}\nmessage-m"),
            NewJob("o", OTHER, "{}", now - 1, f"{queue}\nmessage-o"),
        ]
    )
    assert store.pause(TASK, PAUSED, "", "") == 1
    pause_by_hand(raw, prefix, "tasks.missed")
    lock = store.acquire_lock(LOCK, "me", 30)
    assert lock is not None
    try:
        # When a batch is released onto the lists
        moved, claimed = store.release_to_lists(10, lock, 30, db)
        # Then only the other task's job went out; the missed one was held, not pushed
        assert ([job.id for job in moved], claimed) == (["o"], [])
        assert broker.lrange(queue, 0, -1) == ["message-o"]
        assert {i: store.get_job(i).state for i in "pm"} == {  # type: ignore[union-attr]
            "p": JobState.HELD,
            "m": JobState.HELD,
        }
        assert store.fetch_due_ids(10) == []
        # And once resumed, they go out in due order with their messages
        assert store.resume(TASK, PAUSED) == 1
        assert store.resume(TASK, "tasks.missed") == 1
        moved, _ = store.release_to_lists(10, lock, 30, db)
        assert [job.id for job in moved] == ["p", "m"]
        assert broker.lrange(queue, 0, -1) == ["message-m", "message-p", "message-o"]
    finally:
        broker.delete(queue)
        broker.close()


def test_the_claim_scripts_hold_a_job_the_sweep_has_not_reached(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    store.add_jobs([NewJob("a", PAUSED, "{}", now - 2), NewJob("b", PAUSED, "{}", now - 1)])
    pause_by_hand(raw, prefix, PAUSED)
    lock = store.acquire_lock(LOCK, "me", 30)
    assert lock is not None
    assert store.claim("a", lock, 30) is None
    assert store.claim_due(10, lock, 30) == []
    assert [record.id for record in list(walk_jobs(store, JobQuery(state=JobState.HELD)))] == [
        "a",
        "b",
    ]
    assert store.next_due_at() is None


def test_a_paused_tasks_firing_is_not_pushed_onto_its_list(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given a recurring job of a paused task whose due firing carries an envelope
    db, broker = _list_broker(raw)
    queue = f"{prefix}-q"
    now = store.now()
    store.save_recurring(recurring("r", now - 1), "create")
    store.pause(TASK, "tasks.report", "", "")
    record = store.get_recurring("r")
    assert record is not None
    job = NewJob("r@1", "tasks.report", "{}", now - 1, f"{queue}\nmessage", "reports")
    firing = PlannedFiring("r", record.version, Firing(now + 60, now - 1, "[]", (job,)))
    lock = store.acquire_lock("recurring-scheduler", "me", 30)
    assert lock is not None
    try:
        # When it is fired towards the broker's database
        flags, pushed = store.fire_recurring_to_lists(lock, [firing], db)
        # Then the firing is stored held, with its queue, and nothing reached the list
        assert (flags, pushed) == ([[True]], [])
        assert broker.llen(queue) == 0
        stored = store.get_job("r@1")
        assert stored is not None
        assert (stored.state, stored.queue) == (JobState.HELD, "reports")
        assert raw.hget(f"{{{prefix}}}:job:r@1", "envelope") == f"{queue}\nmessage"
        # And once resumed, the release pushes it
        store.resume(TASK, "tasks.report")
        moved, _ = store.release_to_lists(10, store.acquire_lock(LOCK, "me", 30), 30, db)  # type: ignore[arg-type]
        assert [j.id for j in moved] == ["r@1"]
        assert broker.lrange(queue, 0, -1) == ["message"]
    finally:
        broker.delete(queue)
        broker.close()


def test_resuming_again_gives_back_jobs_a_failed_resume_left_held(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    # Given held jobs whose pause is gone, as a resume that failed after ending the pause leaves
    now = store.now()
    store.add_jobs([NewJob("a", PAUSED, "{}", now - 1), NewJob("b", OTHER, "{}", now - 1)])
    store.pause(TASK, PAUSED, "", "")
    store.pause(TASK, OTHER, "", "")
    raw.hdel(f"{{{prefix}}}:pauses", f"task:{PAUSED}")
    # When the resume is repeated
    assert store.resume(TASK, PAUSED) == 1
    # Then the orphan is due again, and the job another pause holds stays held
    assert store.fetch_due_ids(10) == ["a"]
    assert store.get_job("b").state is JobState.HELD  # type: ignore[union-attr]


def test_pause_keys_carry_the_prefix_hash_tag_and_drop_removes_them(
    store: RedisStorage, raw: redis.Redis, prefix: str
) -> None:
    now = store.now()
    store.add_jobs([NewJob("a", PAUSED, "{}", now - 1, None, "mail")])
    store.pause(PauseKind.QUEUE, "mail", "why", "who")
    assert raw.hget(f"{{{prefix}}}:job:a", "queue") == "mail"
    assert raw.zrange(f"{{{prefix}}}:state:held", 0, -1) == ["a"]
    assert raw.hkeys(f"{{{prefix}}}:pauses") == ["queue:mail"]
    store.drop()
    assert base.keys_of(raw, prefix) == []


def test_a_hand_edited_pause_never_makes_the_listing_crash(
    raw: redis.Redis, prefix: str, store: RedisStorage
) -> None:
    store.pause(TASK, PAUSED, "kept", "ops")
    for field, value in [
        ("topic:x", '1 ["", ""]'),  # no such kind
        ("task:a", "not-a-time []"),
        ("task:b", "1 {broken"),
        ("task:c", "1 42"),
        ("task:d", "1"),
    ]:
        raw.hset(f"{{{prefix}}}:pauses", field, value)
    assert [(p.name, p.note) for p in store.list_pauses()] == [(PAUSED, "kept")]
