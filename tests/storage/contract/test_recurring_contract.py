"""The recurring part of the storage contract, run identically against every adapter."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    Firing,
    JobState,
    LockLease,
    ManualFiring,
    NewJob,
    NewRecurring,
    Storage,
)
from storage_adapters.errors import (
    InvalidArgumentError,
    InvalidIdentifierError,
    RecordExistsError,
    RecordNotFoundError,
)
from tests.storage.due_jobs import fire_one
from tests.together import together

LOCK = "recurring-scheduler"


def recurring(
    rid: str, next_run_at: float | None, enabled: bool = True, task: str = "tasks.report"
) -> NewRecurring:
    return NewRecurring(
        id=rid,
        task=task,
        payload='{"args": [], "kwargs": {}, "options": {}}',
        schedule='{"cron": "* * * * *", "timezone": "UTC"}',
        enabled=enabled,
        next_run_at=next_run_at,
    )


def firing(rid: str, tick: float, next_run_at: float | None, history: str = "[]") -> Firing:
    """A firing of ``rid`` at ``tick``, its job id in the firing form (``r@<UTC time>Z``),
    which a sharded store requires so that the firing lands in its recurring job's shard."""
    moment = datetime.fromtimestamp(tick, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = NewJob(id=f"{rid}@{moment}", task="tasks.report", payload="{}", due_at=tick)
    return Firing(next_run_at=next_run_at, last_run_at=tick, history=history, jobs=(job,))


def take_lock(storage: Storage, owner: str = "a", lease: float = 30) -> LockLease:
    lock = storage.acquire_lock(LOCK, owner, lease)
    assert lock is not None
    return lock


def test_create_get_and_list(storage: Storage) -> None:
    now = storage.now()
    assert storage.save_recurring(recurring("b", now + 60), "create")
    assert storage.save_recurring(recurring("a", now + 30), "upsert")
    record = storage.get_recurring("a")
    assert record is not None
    assert (record.task, record.enabled, record.last_run_at) == ("tasks.report", True, None)
    assert record.next_run_at == pytest.approx(now + 30, abs=1e-3)
    assert record.schedule == '{"cron": "* * * * *", "timezone": "UTC"}'
    assert record.history == "[]"
    assert [r.id for r in storage.list_recurring(10)] == ["a", "b"]
    assert [r.id for r in storage.list_recurring(1, offset=1)] == ["b"]
    assert storage.count_recurring() == 2
    assert storage.get_recurring("missing") is None


def test_save_modes(storage: Storage) -> None:
    now = storage.now()
    with pytest.raises(RecordNotFoundError, match="does not exist"):
        storage.save_recurring(recurring("a", now), "update")
    assert storage.count_recurring() == 0
    storage.save_recurring(recurring("a", now), "create")
    with pytest.raises(RecordExistsError, match="already exists"):
        storage.save_recurring(recurring("a", now + 5), "create")
    before = storage.get_recurring("a")
    assert before is not None
    assert not storage.save_recurring(recurring("a", now + 99, task="tasks.other"), "update")
    after = storage.get_recurring("a")
    assert after is not None
    assert after.task == "tasks.other"
    assert after.next_run_at == pytest.approx(now + 99, abs=1e-3)
    assert after.version > before.version
    assert after.created_at == pytest.approx(before.created_at)
    assert not storage.save_recurring(recurring("a", now), "upsert")


def test_only_enabled_due_recurring_jobs_are_fetched_earliest_first(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("late", now - 1), "create")
    storage.save_recurring(recurring("early", now - 5), "create")
    storage.save_recurring(recurring("future", now + 3600), "create")
    storage.save_recurring(recurring("paused", now - 10, enabled=False), "create")
    storage.save_recurring(recurring("ended", None), "create")
    assert [r.id for r in storage.fetch_due_recurring(10)] == ["early", "late"]
    assert [r.id for r in storage.fetch_due_recurring(1)] == ["early"]


def test_recurring_jobs_up_to_an_instant_are_fetched_due_or_not(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("due", now - 1), "create")
    storage.save_recurring(recurring("soon-b", now + 30), "create")
    storage.save_recurring(recurring("soon-a", now + 30), "create")
    storage.save_recurring(recurring("later", now + 3600), "create")
    storage.save_recurring(recurring("paused", now + 10, enabled=False), "create")
    # Up to an instant to come: every enabled job by then, earliest first, ties by id
    fetched = storage.fetch_due_recurring(10, until=now + 30)
    assert [r.id for r in fetched] == ["due", "soon-a", "soon-b"]
    assert [r.id for r in storage.fetch_due_recurring(2, until=now + 30)] == ["due", "soon-a"]
    # A page further on skips the first ones, in the same order
    page = storage.fetch_due_recurring(2, until=now + 30, offset=1)
    assert [r.id for r in page] == ["soon-a", "soon-b"]
    assert storage.fetch_due_recurring(2, until=now + 30, offset=3) == []
    # An instant past is one too; the default stays "due now"
    assert storage.fetch_due_recurring(10, until=now - 100) == []
    assert [r.id for r in storage.fetch_due_recurring(10)] == ["due"]


@pytest.mark.untouched
@pytest.mark.parametrize("offset", [-1, 1.5, True, "2"])
def test_a_bad_offset_of_due_recurring_jobs_is_refused(storage: Storage, offset: object) -> None:
    with pytest.raises(InvalidArgumentError, match="offset"):
        storage.fetch_due_recurring(10, until=storage.now(), offset=offset)  # type: ignore[arg-type]


@pytest.mark.untouched
@pytest.mark.parametrize("until", [float("nan"), float("inf"), "soon", True])
def test_a_bad_until_is_refused(storage: Storage, until: object) -> None:
    with pytest.raises(InvalidArgumentError, match="until"):
        storage.fetch_due_recurring(10, until=until)  # type: ignore[arg-type]


def test_pause_and_resume(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("a", now - 1), "create")
    version = storage.get_recurring("a").version  # type: ignore[union-attr]
    assert storage.set_recurring_enabled("a", False, now - 1)
    assert storage.fetch_due_recurring(10) == []
    assert storage.set_recurring_enabled("a", True, now - 2)
    (record,) = storage.fetch_due_recurring(10)
    assert record.enabled and record.version > version
    assert record.next_run_at == pytest.approx(now - 2, abs=1e-3)
    assert not storage.set_recurring_enabled("missing", True, now)


def test_a_pause_given_a_version_is_a_compare_and_set(storage: Storage) -> None:
    # Given a job read at one version, then resumed (changed) by someone else
    now = storage.now()
    storage.save_recurring(recurring("a", now - 1), "create")
    read = storage.get_recurring("a")
    assert read is not None
    assert storage.set_recurring_enabled("a", True, now - 1)
    # When a pause is asked on the version first read, then nothing changes
    assert not storage.set_recurring_enabled(
        "a", False, now + 60, "why", "me", version=read.version
    )
    kept = storage.get_recurring("a")
    assert kept is not None and kept.enabled and kept.pause_note is None
    # And on the version it has now, the pause is made
    assert storage.set_recurring_enabled("a", False, now + 60, "why", "me", version=kept.version)
    paused = storage.get_recurring("a")
    assert paused is not None and not paused.enabled and paused.pause_note == "why"
    assert paused.version == kept.version + 1


def test_a_pause_keeps_its_note_who_and_since_when_and_a_resume_clears_them(
    storage: Storage,
) -> None:
    # Given a recurring job stored enabled: no pause, nothing about one
    now = storage.now()
    storage.save_recurring(recurring("a", now + 60), "create")
    storage.save_recurring(recurring("b", now + 60), "create")
    fresh = storage.get_recurring("a")
    assert fresh is not None
    assert (fresh.pause_note, fresh.paused_by, fresh.paused_at) == (None, None, None)
    # When it is paused with a note and who
    assert storage.set_recurring_enabled("a", False, now + 60, "broker migration <b>", "ops@h")
    # Then get_recurring and list_recurring read them back, since the storage clock's now
    paused = storage.get_recurring("a")
    assert paused is not None and not paused.enabled
    assert (paused.pause_note, paused.paused_by) == ("broker migration <b>", "ops@h")
    assert paused.paused_at == pytest.approx(storage.now(), abs=5)
    listed = {r.id: r for r in storage.list_recurring(10)}
    assert listed["a"] == paused
    assert listed["b"].pause_note is None and listed["b"].paused_at is None
    # Pausing again replaces the note and who, and keeps since when
    assert storage.set_recurring_enabled("a", False, now + 60, "still migrating", "")
    again = storage.get_recurring("a")
    assert again is not None
    assert (again.pause_note, again.paused_by) == ("still migrating", "")
    assert again.paused_at == paused.paused_at
    # A resume clears all three
    assert storage.set_recurring_enabled("a", True, now + 60)
    resumed = storage.get_recurring("a")
    assert resumed is not None and resumed.enabled
    assert (resumed.pause_note, resumed.paused_by, resumed.paused_at) == (None, None, None)


def test_a_save_that_enables_a_paused_job_ends_its_pause(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("a", now + 60), "create")
    assert storage.set_recurring_enabled("a", False, now + 60, "why", "who")
    storage.save_recurring(recurring("a", now + 90, enabled=False), "update")
    kept = storage.get_recurring("a")
    assert kept is not None and (kept.pause_note, kept.paused_by) == ("why", "who")
    storage.save_recurring_many([recurring("a", now + 90)], "upsert")
    ended = storage.get_recurring("a")
    assert ended is not None and ended.enabled
    assert (ended.pause_note, ended.paused_by, ended.paused_at) == (None, None, None)


@pytest.mark.parametrize(
    ("note", "paused_by", "words"),
    [
        ("x" * 1001, "ops", "a pause's note must be a string of at most 1000 characters"),
        (None, "ops", "a pause's note must be a string of at most 1000 characters"),
        ("", "y" * 256, "a pause's paused_by must be a string of at most 255 characters"),
    ],
)
def test_a_bad_pause_note_or_who_is_refused_and_nothing_is_written(
    storage: Storage, note: object, paused_by: object, words: str
) -> None:
    now = storage.now()
    storage.save_recurring(recurring("a", now + 60), "create")
    before = storage.get_recurring("a")
    with pytest.raises(InvalidArgumentError, match=words):
        storage.set_recurring_enabled("a", False, now + 60, note, paused_by)  # type: ignore[arg-type]
    assert storage.get_recurring("a") == before


def test_fire_adds_the_job_and_advances_atomically(storage: Storage) -> None:
    # Given a due recurring job
    now = storage.now()
    storage.save_recurring(recurring("r", now - 1), "create")
    (record,) = storage.fetch_due_recurring(10)
    lock = take_lock(storage)
    # When it fires
    fired = firing("r", now - 1, now + 59, history='["r@1"]')
    created = fire_one(storage, "r", record.version, lock, fired)
    # Then the firing job exists, due at the tick, and the recurring job moved on
    assert created == [True]
    job = storage.get_job(fired.jobs[0].id)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.due_at == pytest.approx(now - 1, abs=1e-3)
    after = storage.get_recurring("r")
    assert after is not None
    assert after.next_run_at == pytest.approx(now + 59, abs=1e-3)
    assert after.last_run_at == pytest.approx(now - 1, abs=1e-3)
    assert after.history == '["r@1"]'
    assert after.version == record.version + 1
    assert storage.fetch_due_recurring(10) == []


def test_fire_with_a_stale_version_or_lock_changes_nothing(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("r", now - 1), "create")
    (record,) = storage.fetch_due_recurring(10)
    stale_lock = take_lock(storage, "a", lease=0.3)
    fresh_lock = wait_until(lambda: storage.acquire_lock(LOCK, "b", 30), timeout=5)
    assert fire_one(storage, "r", record.version, stale_lock, firing("r", now, now + 60)) is None
    assert (
        fire_one(storage, "r", record.version + 7, fresh_lock, firing("r", now, now + 60)) is None
    )
    assert storage.get_job(f"r@{now:.0f}") is None
    assert storage.get_recurring("r") == record


def test_a_tick_fired_twice_creates_one_job(storage: Storage) -> None:
    # Given a tick whose firing job exists already (say, from a crashed attempt)
    now = storage.now()
    storage.save_recurring(recurring("r", now - 1), "create")
    lock = take_lock(storage)
    storage.add_jobs(firing("r", now - 1, None).jobs)
    (record,) = storage.fetch_due_recurring(10)
    # When the same tick fires again, it still advances but adds no second job
    assert fire_one(storage, "r", record.version, lock, firing("r", now - 1, now + 60)) == [False]
    assert storage.count_by_state()[JobState.SCHEDULED] == 1
    after = storage.get_recurring("r")
    assert after is not None and after.next_run_at == pytest.approx(now + 60, abs=1e-3)


def test_racing_firings_of_one_version_succeed_once(storage: Storage) -> None:
    now = storage.now()
    ids = [f"r{i:03d}" for i in range(50)]
    for rid in ids:
        storage.save_recurring(recurring(rid, now - 1), "create")
    records = storage.fetch_due_recurring(100)
    lock = take_lock(storage)

    def fire_all(which: int) -> int:
        wins = 0
        for record in records:
            tick = now - 1 + which * 1000  # different ticks: only the version can stop the loser
            result = fire_one(
                storage, record.id, record.version, lock, firing(record.id, tick, now + 60)
            )
            wins += result is not None
        return wins

    wins = together(fire_all, range(2))
    assert sum(wins) == len(ids)
    assert sum(storage.count_by_state().values()) == len(ids)


def trigger(rid: str, at: float, history: str = "[]") -> ManualFiring:
    """A manual trigger of ``rid`` at ``at``, its job id in the trigger form."""
    moment = datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    job = NewJob(id=f"{rid}@trigger-{moment}", task="tasks.report", payload="{}", due_at=at)
    return ManualFiring(last_run_at=at, history=history, job=job)


def test_a_trigger_adds_its_job_and_leaves_the_schedule_alone(storage: Storage) -> None:
    # Given a recurring job due later, and one due now
    now = storage.now()
    storage.save_recurring(recurring("r", now + 3600), "create")
    storage.save_recurring(recurring("due", now - 1), "create")
    before = storage.get_recurring("r")
    assert before is not None
    # When it is triggered, without any lock
    fired = trigger("r", now, history='[{"job_id":"x","trigger":true}]')
    assert storage.trigger_recurring("r", before.version, fired) is True
    # Then its job is due now, and only its last run and history changed
    job = storage.get_job(fired.job.id)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.due_at == pytest.approx(now, abs=1e-3)
    after = storage.get_recurring("r")
    assert after is not None
    assert after.last_run_at == pytest.approx(now, abs=1e-3)
    assert after.history == '[{"job_id":"x","trigger":true}]'
    assert after.version == before.version + 1
    assert (after.next_run_at, after.enabled) == (before.next_run_at, before.enabled)
    assert [r.id for r in storage.fetch_due_recurring(10)] == ["due"]
    # And a triggered job that is due keeps its place in the due index
    (due,) = storage.fetch_due_recurring(10)
    assert storage.trigger_recurring("due", due.version, trigger("due", now)) is True
    assert [(r.id, r.next_run_at) for r in storage.fetch_due_recurring(10)] == [
        ("due", due.next_run_at)
    ]


def test_a_trigger_on_a_stale_version_or_a_missing_job_changes_nothing(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("r", now + 60), "create")
    record = storage.get_recurring("r")
    assert record is not None
    assert storage.trigger_recurring("r", record.version + 1, trigger("r", now)) is None
    assert storage.trigger_recurring("missing", 1, trigger("missing", now)) is None
    assert storage.get_job(trigger("r", now).job.id) is None
    assert storage.get_job(trigger("missing", now).job.id) is None
    assert storage.get_recurring("r") == record
    with pytest.raises(InvalidArgumentError):
        bad = ManualFiring(float("nan"), "[]", trigger("r", now).job)
        storage.trigger_recurring("r", record.version, bad)
    assert storage.get_recurring("r") == record


def test_a_trigger_and_a_firing_of_one_version_succeed_once(storage: Storage) -> None:
    # Given a due recurring job, read once by a scheduler and a trigger alike
    now = storage.now()
    storage.save_recurring(recurring("r", now - 1), "create")
    (record,) = storage.fetch_due_recurring(10)
    lock = take_lock(storage)
    # When the trigger writes first, the firing computed from the same version is stale
    assert storage.trigger_recurring("r", record.version, trigger("r", now)) is True
    assert fire_one(storage, "r", record.version, lock, firing("r", now - 1, now + 60)) is None
    # And the firing of the version after it goes through
    (again,) = storage.fetch_due_recurring(10)
    assert fire_one(storage, "r", again.version, lock, firing("r", now - 1, now + 60)) == [True]
    assert storage.count_by_state()[JobState.SCHEDULED] == 2


def test_remove(storage: Storage) -> None:
    storage.save_recurring(recurring("a", storage.now()), "create")
    assert storage.remove_recurring("a")
    assert not storage.remove_recurring("a")
    assert storage.get_recurring("a") is None
    assert storage.count_recurring() == 0


def test_a_bad_id_is_refused(storage: Storage) -> None:
    with pytest.raises(InvalidIdentifierError):
        storage.save_recurring(recurring("has space", storage.now()), "create")
    assert storage.count_recurring() == 0


def test_the_next_recurring_run_is_the_earliest_enabled_one_due_or_not(storage: Storage) -> None:
    # Given no recurring job, then some due later, one paused earlier and one with no next run
    assert storage.next_recurring_at() is None
    now = storage.now()
    storage.save_recurring(recurring("later", now + 600), "create")
    storage.save_recurring(recurring("soon", now + 60), "create")
    storage.save_recurring(recurring("paused", now + 5, enabled=False), "create")
    storage.save_recurring(recurring("ended", None), "create")
    # Then the next run is the earliest enabled one's, though none is due yet
    assert storage.fetch_due_recurring(10) == []
    assert storage.next_recurring_at() == pytest.approx(now + 60, abs=1e-3)
    # And a firing that moves it on, or a pause, moves the answer with it
    soon = storage.get_recurring("soon")
    assert soon is not None
    lock = storage.acquire_lock(LOCK, "me", 30.0)
    assert lock is not None
    assert fire_one(storage, "soon", soon.version, lock, firing("soon", now + 60, now + 900))
    assert storage.next_recurring_at() == pytest.approx(now + 600, abs=1e-3)
    assert storage.set_recurring_enabled("later", False, now + 600)
    assert storage.next_recurring_at() == pytest.approx(now + 900, abs=1e-3)
