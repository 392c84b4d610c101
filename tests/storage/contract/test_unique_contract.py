"""Unique jobs in the storage contract (``UniqueJobStore``), run against every adapter kind: one
job per ``(task, unique_key)`` waits to be released, a second call keeps it or moves it, racing
clients agree on one, and the key is free again once its job is done with."""

from __future__ import annotations

import threading

import pytest

from storage_adapters import (
    InvalidArgumentError,
    InvalidRecordError,
    JobState,
    NewJob,
    PauseKind,
    RecordExistsError,
    Storage,
    UniqueAdd,
    shards_of,
)
from storage_adapters.sharding import unique_job_id
from tests.storage.due_jobs import take_lock


def unique(
    storage: Storage,
    key: str,
    due_at: float,
    task: str = "tasks.invoice",
    payload: str = "{}",
    job_id: str | None = None,
) -> NewJob:
    """A unique job whose id lands in its key's shard (any id does on one shard)."""
    made = job_id or unique_job_id(task, key, len(shards_of(storage)))
    return NewJob(made, task, payload, due_at, unique_key=key)


def stored(storage: Storage, job_id: str) -> tuple[JobState, float, str]:
    record = storage.get_job(job_id)
    assert record is not None, job_id
    return record.state, record.due_at, record.payload


def test_a_second_job_with_a_held_key_keeps_the_first(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "invoice-42", now + 60, payload='{"v": 1}')
    assert storage.add_unique_job(first, "keep") == UniqueAdd(first.id, True, False)
    second = unique(storage, "invoice-42", now + 600, payload='{"v": 2}')
    assert storage.add_unique_job(second, "keep") == UniqueAdd(first.id, False, False)
    assert stored(storage, first.id) == (JobState.SCHEDULED, pytest.approx(now + 60), '{"v": 1}')
    assert storage.get_job(second.id) is None
    assert storage.count_by_state()[JobState.SCHEDULED] == 1
    record = storage.get_job(first.id)
    assert record is not None and record.unique_key == "invoice-42"


def test_replace_moves_the_holder_and_keeps_its_id(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "k", now + 60, payload='{"v": 1}')
    storage.add_unique_job(first, "keep")
    second = unique(storage, "k", now - 5, payload='{"v": 2}')
    assert storage.add_unique_job(second, "replace") == UniqueAdd(first.id, False, True)
    assert stored(storage, first.id) == (JobState.SCHEDULED, pytest.approx(now - 5), '{"v": 2}')
    assert storage.get_job(second.id) is None
    # the move is seen by the release: the job is due now
    assert storage.fetch_due_ids(10) == [first.id]


def test_the_key_is_per_task(storage: Storage) -> None:
    now = storage.now()
    a = unique(storage, "k", now, task="tasks.a")
    b = unique(storage, "k", now, task="tasks.b")
    assert storage.add_unique_job(a, "keep").created
    assert storage.add_unique_job(b, "keep").created
    assert storage.count_by_state()[JobState.SCHEDULED] == 2


def test_the_same_id_again_is_an_idempotent_accept(storage: Storage) -> None:
    now = storage.now()
    job = unique(storage, "k", now + 60)
    storage.add_unique_job(job, "keep")
    again = NewJob(job.id, job.task, '{"v": 9}', now + 999, unique_key="k")
    assert storage.add_unique_job(again, "replace") == UniqueAdd(job.id, False, False)
    assert stored(storage, job.id)[1:] == (pytest.approx(now + 60), "{}")


@pytest.mark.parametrize("ending", ["enqueued", "cancelled", "expired", "failed"])
def test_the_key_is_free_once_its_job_is_done_with(storage: Storage, ending: str) -> None:
    now = storage.now()
    first = unique(storage, "k", now - 1)
    storage.add_unique_job(first, "keep")
    if ending == "cancelled":
        assert storage.cancel(first.id)
    else:
        (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
        finish = {
            "enqueued": lambda: storage.mark_enqueued([claim]),
            "expired": lambda: storage.expire([claim], "too late"),
            "failed": lambda: storage.fail([claim], "gave up"),
        }[ending]
        assert finish() == [first.id]
    second = unique(storage, "k", now + 60)
    assert storage.add_unique_job(second, "keep") == UniqueAdd(second.id, True, False)
    assert stored(storage, second.id)[0] is JobState.SCHEDULED


def test_a_claimed_holder_keeps_its_key_and_is_never_replaced(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "k", now - 1, payload='{"v": 1}')
    storage.add_unique_job(first, "keep")
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    second = unique(storage, "k", now + 60, payload='{"v": 2}')
    assert storage.add_unique_job(second, "replace") == UniqueAdd(first.id, False, False)
    assert storage.add_unique_job(second, "keep") == UniqueAdd(first.id, False, False)
    # given back, it still holds its key, unchanged
    assert storage.unclaim([claim], "broker down") == [first.id]
    assert stored(storage, first.id) == (JobState.SCHEDULED, pytest.approx(now - 1), '{"v": 1}')
    assert storage.add_unique_job(second, "keep") == UniqueAdd(first.id, False, False)


def test_a_held_holder_is_replaced_and_stays_held(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "k", now + 60)
    storage.add_unique_job(first, "keep")
    storage.pause(PauseKind.TASK, "tasks.invoice", "", "")
    second = unique(storage, "k", now - 1, payload='{"v": 2}')
    assert storage.add_unique_job(second, "replace") == UniqueAdd(first.id, False, True)
    assert stored(storage, first.id) == (JobState.HELD, pytest.approx(now - 1), '{"v": 2}')
    assert storage.fetch_due_ids(10) == []


def test_a_new_unique_job_of_a_paused_task_is_held_and_holds_its_key(storage: Storage) -> None:
    now = storage.now()
    storage.pause(PauseKind.TASK, "tasks.invoice", "", "")
    first = unique(storage, "k", now - 1)
    assert storage.add_unique_job(first, "keep").created
    assert stored(storage, first.id)[0] is JobState.HELD
    assert storage.add_unique_job(unique(storage, "k", now), "keep").job_id == first.id


def test_a_failed_job_cannot_be_rescheduled_onto_a_key_held_by_another(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "k", now - 1)
    storage.add_unique_job(first, "keep")
    (claim,) = storage.claim_due(1, take_lock(storage), lease=30)
    storage.fail([claim], "gave up")
    second = unique(storage, "k", now + 60)
    storage.add_unique_job(second, "keep")
    with pytest.raises(RecordExistsError, match="unique_key 'k'"):
        storage.reschedule(first.id, now)
    assert stored(storage, first.id)[0] is JobState.FAILED
    storage.cancel(second.id)
    assert storage.reschedule(first.id, now) is True
    assert stored(storage, first.id)[0] is JobState.SCHEDULED


def test_racing_clients_agree_on_one_job(storage: Storage) -> None:
    # Given eight clients adding jobs with one key at the same instant, each with its own id
    now = storage.now()
    candidates = [unique(storage, "race", now + 60, payload=f'{{"n": {n}}}') for n in range(8)]
    barrier = threading.Barrier(len(candidates))
    answers: list[UniqueAdd] = []

    def add(job: NewJob) -> None:
        barrier.wait()
        answers.append(storage.add_unique_job(job, "keep"))

    threads = [threading.Thread(target=add, args=(job,)) for job in candidates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one created the job, and every answer names it
    assert sum(answer.created for answer in answers) == 1
    assert len({answer.job_id for answer in answers}) == 1
    assert storage.count_by_state()[JobState.SCHEDULED] == 1


def test_racing_replacements_leave_one_job_with_one_of_their_times(storage: Storage) -> None:
    now = storage.now()
    first = unique(storage, "k", now + 60)
    storage.add_unique_job(first, "keep")
    times = [now + 100 + n for n in range(6)]
    barrier = threading.Barrier(len(times))

    def replace(due: float) -> None:
        barrier.wait()
        storage.add_unique_job(unique(storage, "k", due), "replace")

    threads = [threading.Thread(target=replace, args=(due,)) for due in times]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert storage.count_by_state()[JobState.SCHEDULED] == 1
    assert min(abs(stored(storage, first.id)[1] - due) for due in times) < 1e-3


@pytest.mark.untouched
def test_add_jobs_refuses_a_unique_job(storage: Storage) -> None:
    job = unique(storage, "k", storage.now())
    with pytest.raises(InvalidRecordError, match="add_unique_job"):
        storage.add_jobs([job])
    assert storage.get_job(job.id) is None


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "unique_key must be a string of 1-255"),
        ("k" * 256, "unique_key must be a string of 1-255"),
        (" k", "without leading or trailing spaces"),
        ("a\nb", "must be printable"),
        (42, "unique_key must be a string"),
    ],
)
def test_a_bad_unique_key_is_refused_by_name_and_nothing_written(
    storage: Storage, key: object, message: str
) -> None:
    job = NewJob("bad-key", "tasks.invoice", "{}", storage.now(), unique_key=key)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match=message):
        storage.add_unique_job(job, "keep")
    assert storage.get_job("bad-key") is None


@pytest.mark.untouched
def test_a_bad_conflict_rule_or_a_job_without_key_is_refused(storage: Storage) -> None:
    job = unique(storage, "k", storage.now())
    with pytest.raises(InvalidArgumentError, match="on_conflict must be 'keep' or 'replace'"):
        storage.add_unique_job(job, "merge")  # type: ignore[arg-type]
    plain = NewJob("plain", "tasks.invoice", "{}", storage.now())
    with pytest.raises(InvalidRecordError, match="unique_key is set"):
        storage.add_unique_job(plain, "keep")
    assert storage.get_job(job.id) is None and storage.get_job("plain") is None
