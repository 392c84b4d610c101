"""Pauses of a queue or a task in the storage contract (``PauseStore``), run against every adapter
kind: a paused name's jobs are held whatever way they would become due, the release of the other
jobs never sees them, and resuming gives them back in due order."""

from __future__ import annotations

import threading

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    InvalidArgumentError,
    JobState,
    NewJob,
    PauseKind,
    PlannedFiring,
    Storage,
    list_jobs,
)
from tests.storage.contract.test_recurring_contract import firing, recurring
from tests.storage.due_jobs import take_lock

QUEUE, TASK = PauseKind.QUEUE, PauseKind.TASK


def job(job_id: str, due_at: float, task: str = "tasks.mail", queue: str | None = None) -> NewJob:
    return NewJob(id=job_id, task=task, payload="{}", due_at=due_at, queue=queue)


def state_of(storage: Storage, job_id: str) -> JobState:
    record = storage.get_job(job_id)
    assert record is not None, job_id
    return record.state


def ids_in(storage: Storage, state: JobState) -> list[str]:
    return [record.id for record in list_jobs(storage, state, 1000)]


def test_pausing_a_task_holds_its_scheduled_jobs_and_only_them(storage: Storage) -> None:
    # Given due jobs of two tasks and a later one of the paused task
    now = storage.now()
    storage.add_jobs(
        [job("m1", now - 3), job("o1", now - 2, task="tasks.other"), job("m2", now + 3600)]
    )
    # When the task is paused
    assert storage.pause(TASK, "tasks.mail", "mail server down", "ops") == 2
    # Then its jobs are held with their due times, and the release sees only the other task
    assert ids_in(storage, JobState.HELD) == ["m1", "m2"]
    assert storage.count_by_state()[JobState.HELD] == 2
    assert storage.count_by_state()[JobState.SCHEDULED] == 1
    record = storage.get_job("m1")
    assert record is not None and record.due_at == pytest.approx(now - 3, abs=1e-3)
    assert storage.fetch_due_ids(10) == ["o1"]
    assert storage.next_due_at() == pytest.approx(now - 2, abs=1e-3)
    lock = take_lock(storage)
    claims = storage.claim_due(10, lock, lease=30)
    assert [claim.id for claim in claims] == ["o1"]
    assert storage.claim("m1", lock, lease=30) is None
    assert storage.next_due_at() is None
    (pause,) = storage.list_pauses()
    assert (pause.kind, pause.name, pause.note, pause.paused_by) == (
        TASK,
        "tasks.mail",
        "mail server down",
        "ops",
    )
    assert pause.paused_at == pytest.approx(storage.now(), abs=5)


def test_next_work_ignores_held_jobs(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("m1", now - 3), job("later", now + 3600, task="tasks.other")])
    storage.pause(TASK, "tasks.mail", "", "")
    assert storage.next_work_at() == pytest.approx(now + 3600, abs=1e-3)
    assert storage.next_due_at() == pytest.approx(now + 3600, abs=1e-3)


def test_pausing_a_queue_holds_the_jobs_stored_with_it(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs(
        [
            job("a", now - 3, queue="emails"),
            job("b", now - 2, queue="reports"),
            job("c", now - 1),  # queue unknown: only a pause of its task holds it
        ]
    )
    assert storage.pause(QUEUE, "emails", "", "") == 1
    assert ids_in(storage, JobState.HELD) == ["a"]
    assert storage.fetch_due_ids(10) == ["b", "c"]
    record = storage.get_job("a")
    assert record is not None and record.queue == "emails"
    unknown = storage.get_job("c")
    assert unknown is not None and unknown.queue is None


def test_jobs_accepted_while_paused_are_held_and_resume_releases_them_in_due_order(
    storage: Storage,
) -> None:
    now = storage.now()
    storage.pause(QUEUE, "emails", "", "")
    # When jobs of the paused queue are accepted, out of due order, beside another queue's
    storage.add_jobs(
        [
            job("e3", now - 1, queue="emails"),
            job("e1", now - 3, queue="emails"),
            job("x", now - 10, queue="other"),
            job("e2", now - 2, queue="emails"),
        ]
    )
    assert ids_in(storage, JobState.HELD) == ["e1", "e2", "e3"]
    assert storage.fetch_due_ids(10) == ["x"]
    # Then resuming makes them due again at their own times, earliest first
    assert storage.resume(QUEUE, "emails") == 3
    assert storage.list_pauses() == []
    assert storage.fetch_due_ids(10) == ["x", "e1", "e2", "e3"]
    assert ids_in(storage, JobState.HELD) == []
    # and ending a pause that is not in force does nothing
    assert storage.resume(QUEUE, "emails") == 0


def test_a_job_held_by_two_pauses_waits_for_both(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1, queue="emails"), job("b", now - 1, queue="reports")])
    storage.pause(QUEUE, "emails", "", "")
    storage.pause(TASK, "tasks.mail", "", "")
    assert storage.resume(QUEUE, "emails") == 0
    assert ids_in(storage, JobState.HELD) == ["a", "b"]
    assert storage.resume(TASK, "tasks.mail") == 2
    assert state_of(storage, "a") is JobState.SCHEDULED


def test_pausing_again_replaces_the_note_and_keeps_when(storage: Storage) -> None:
    storage.pause(TASK, "tasks.mail", "first", "ann")
    (before,) = storage.list_pauses()
    storage.pause(TASK, "tasks.mail", "second", "bob")
    (after,) = storage.list_pauses()
    assert (after.note, after.paused_by) == ("second", "bob")
    assert after.paused_at == pytest.approx(before.paused_at, abs=1e-3)
    storage.pause(QUEUE, "b", "", "")
    storage.pause(QUEUE, "a", "", "")
    assert [(p.kind, p.name) for p in storage.list_pauses()] == [
        (QUEUE, "a"),
        (QUEUE, "b"),
        (TASK, "tasks.mail"),
    ]


def test_claims_given_back_after_a_pause_are_held(storage: Storage) -> None:
    # Given three jobs claimed before their task was paused
    now = storage.now()
    storage.add_jobs([job("u", now - 3), job("b", now - 2), job("r", now - 1)])
    lock = take_lock(storage)
    claims = {claim.id: claim for claim in storage.claim_due(3, lock, lease=0.2)}
    storage.pause(TASK, "tasks.mail", "", "")
    # When one is given back, one backs off and one's lease runs out and is recovered
    assert storage.unclaim([claims["u"]], "broker down") == ["u"]
    assert storage.back_off([claims["b"]], "refused", 1.0) == ["b"]
    assert wait_until(storage.recover_expired_claims, timeout=30) == 1
    # Then each is held, not due (``b`` a second from now, the others at their own times)
    assert ids_in(storage, JobState.HELD) == ["u", "r", "b"]
    assert storage.fetch_due_ids(10) == []
    assert storage.next_work_at() is None


def test_a_claim_made_before_the_pause_is_still_sent(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1)])
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    storage.pause(TASK, "tasks.mail", "", "")
    assert storage.mark_enqueued([claim]) == ["a"]
    assert state_of(storage, "a") is JobState.ENQUEUED


def test_a_recurring_firing_of_a_paused_task_is_held(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("r", now - 1), "create")
    storage.pause(TASK, "tasks.report", "", "")
    record = storage.get_recurring("r")
    assert record is not None
    planned = PlannedFiring("r", record.version, firing("r", now - 1, now + 60))
    assert storage.fire_recurring_many(take_lock(storage), [planned]) == [[True]]
    assert state_of(storage, planned.firing.jobs[0].id) is JobState.HELD
    assert storage.fetch_due_ids(10) == []


def test_a_held_job_can_be_cancelled_or_moved_and_stays_held(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1), job("b", now - 1)])
    storage.pause(TASK, "tasks.mail", "", "")
    assert storage.cancel("a") is True
    assert state_of(storage, "a") is JobState.CANCELLED
    assert storage.reschedule("b", now + 7200) is True
    record = storage.get_job("b")
    assert record is not None and record.state is JobState.HELD
    assert record.due_at == pytest.approx(now + 7200, abs=1e-3)
    storage.resume(TASK, "tasks.mail")
    assert state_of(storage, "b") is JobState.SCHEDULED
    assert storage.next_due_at() == pytest.approx(now + 7200, abs=1e-3)


def test_a_failed_job_rescheduled_while_paused_is_held(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1)])
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    assert storage.fail([claim], "gave up") == ["a"]
    storage.pause(TASK, "tasks.mail", "", "")
    assert storage.reschedule("a", now) is True
    assert state_of(storage, "a") is JobState.HELD


def test_no_scheduled_job_of_a_paused_task_survives_a_racing_accept(storage: Storage) -> None:
    # Given a producer accepting jobs of one task in small batches while it is paused
    now = storage.now()
    stop = threading.Event()
    start = threading.Barrier(2)

    def produce() -> None:
        start.wait()
        batch = 0
        while not stop.is_set() and batch < 400:
            storage.add_jobs([job(f"j{batch:04d}-{n}", now - 1) for n in range(5)])
            batch += 1

    producer = threading.Thread(target=produce)
    producer.start()
    start.wait()
    wait_until(lambda: storage.count_by_state()[JobState.SCHEDULED] >= 10, timeout=30)
    storage.pause(TASK, "tasks.mail", "", "")
    # Then once the pause is made, no job of the task is ever scheduled again
    try:
        for _ in range(5):
            assert ids_in(storage, JobState.SCHEDULED) == []
            assert storage.fetch_due_ids(10) == []
    finally:
        stop.set()
        producer.join()
    assert ids_in(storage, JobState.SCHEDULED) == []
    held = storage.count_by_state()[JobState.HELD]
    assert held > 0 and held % 5 == 0


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("kind", "name", "note", "by", "message"),
    [
        ("topic", "emails", "", "", "'queue' or a 'task'"),
        (QUEUE, "", "", "", "queue name must be a string of 1-255"),
        (QUEUE, "x" * 256, "", "", "queue name must be a string of 1-255"),
        (TASK, " tasks.mail", "", "", "without leading or trailing spaces"),
        (TASK, "tasks\nmail", "", "", "must be printable"),
        (QUEUE, 42, "", "", "queue name must be a string"),
        (QUEUE, "emails", "n" * 1001, "", "note must be a string of at most 1000"),
        (QUEUE, "emails", None, "", "note must be a string"),
        (QUEUE, "emails", "", "b" * 256, "paused_by must be a string of at most 255"),
    ],
)
def test_a_bad_pause_is_refused_by_name_and_nothing_written(
    storage: Storage, kind: object, name: object, note: object, by: object, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        storage.pause(kind, name, note, by)  # type: ignore[arg-type]
    assert storage.list_pauses() == []


@pytest.mark.untouched
def test_a_bad_resume_is_refused_by_name(storage: Storage) -> None:
    with pytest.raises(InvalidArgumentError, match="'queue' or a 'task'"):
        storage.resume("topic", "emails")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="task name must be a string"):
        storage.resume(TASK, "")
