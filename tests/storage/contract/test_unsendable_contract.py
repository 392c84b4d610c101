"""A claimed job its dispatcher cannot send, in the storage contract, on every adapter:
``back_off`` makes it due again later on its own, ``fail`` sets it aside as ``FAILED`` where
every read finds it, and ``reschedule`` queues a failed job again with its attempts reset."""

from __future__ import annotations

import math

import pytest

from storage_adapters import (
    ClaimedJob,
    InvalidArgumentError,
    JobQuery,
    JobState,
    LockLease,
    NewJob,
    Storage,
    list_jobs,
)

LOCK = "delayed-scheduler"


def claimed(storage: Storage, count: int) -> tuple[LockLease, list[ClaimedJob]]:
    """``count`` due jobs (ids ``j0``, ``j1``, … in due order), claimed under a fresh lock."""
    now = storage.now()
    storage.add_jobs(
        [NewJob(f"j{n}", "tasks.t", "{}", now - 100 + n, "q\nmsg") for n in range(count)]
    )
    lock = storage.acquire_lock(LOCK, "scheduler-a", 30)
    assert lock is not None
    claims = storage.claim_due(count, lock, 30)
    assert [c.id for c in claims] == [f"j{n}" for n in range(count)]
    return lock, claims


def test_back_off_makes_the_job_due_later_with_its_error(storage: Storage) -> None:
    # Given two claimed jobs
    lock, (poison, _other) = claimed(storage, 2)
    before = storage.now()
    # When one of them is backed off for a minute
    assert storage.back_off([poison], "cannot be sent: bad", 60.0) == ["j0"]
    # Then it is Scheduled, due a minute from now, with the error, and not due now
    record = storage.get_job("j0")
    assert record is not None and record.state is JobState.SCHEDULED
    assert record.last_error == "cannot be sent: bad"
    assert record.attempts == 1
    assert before + 59 <= record.due_at <= storage.now() + 61
    assert storage.fetch_due_ids(10) == []
    assert storage.claim("j0", lock, 30) is None
    # And the other claim is untouched
    still = storage.get_job("j1")
    assert still is not None and still.state is JobState.CLAIMED
    assert storage.next_due_at() == pytest.approx(record.due_at, abs=1e-3)
    # And once its time comes it is claimed again, a second attempt
    assert storage.reschedule("j0", storage.now() - 1)
    again = storage.claim("j0", lock, 30)
    assert again is not None and again.attempts == 2


def test_fail_sets_the_job_aside_where_every_read_finds_it(storage: Storage) -> None:
    # Given three claimed jobs
    lock, (poison, sent, _other) = claimed(storage, 3)
    # When one is set aside as failed and another is sent
    assert storage.fail([poison], "cannot be sent: no such exchange") == ["j0"]
    assert storage.mark_enqueued([sent]) == ["j1"]
    # Then it is Failed with its error, and never due
    record = storage.get_job("j0")
    assert record is not None and record.state is JobState.FAILED
    assert record.last_error == "cannot be sent: no such exchange"
    assert record.attempts == 1
    assert storage.fetch_due_ids(10) == []
    assert storage.claim("j0", lock, 30) is None
    assert storage.next_due_at() is None
    # And the counts, the listings and the pages have it
    counts = storage.count_by_state()
    assert counts[JobState.FAILED] == 1 and counts[JobState.CLAIMED] == 1
    assert [r.id for r in list_jobs(storage, JobState.FAILED, 10)] == ["j0"]
    assert [r.id for r in list_jobs(storage, None, 10)] == ["j0", "j1", "j2"]
    page = storage.list_jobs_page(JobQuery(state=JobState.FAILED), 10)
    assert [(r.id, r.last_error) for r in page] == [("j0", record.last_error)]
    # And neither cancel nor retention touches it
    assert not storage.cancel("j0")
    assert storage.purge_finished([JobState.ENQUEUED], storage.now() + 3600, 10) == 1
    assert storage.get_job("j0") == record
    with pytest.raises(InvalidArgumentError):
        storage.purge_finished([JobState.FAILED], storage.now() + 3600, 10)


def test_reschedule_queues_a_failed_job_again_with_its_attempts_reset(storage: Storage) -> None:
    # Given a job set aside as failed after its third claim
    lock, (claim,) = claimed(storage, 1)
    for _ in range(2):
        assert storage.back_off([claim], "cannot be sent", 3600.0) == ["j0"]
        assert storage.reschedule("j0", storage.now() - 1)
        again = storage.claim("j0", lock, 30)
        assert again is not None
        claim = again
    assert claim.attempts == 3
    assert storage.fail([claim], "cannot be sent") == ["j0"]
    failed_at = storage.get_job("j0")
    assert failed_at is not None
    # When it is rescheduled to now
    now = storage.now()
    assert storage.reschedule("j0", now - 1)
    # Then it is Scheduled and due, its attempts counted afresh, its last error kept
    record = storage.get_job("j0")
    assert record is not None and record.state is JobState.SCHEDULED
    assert record.attempts == 0 and record.last_error == "cannot be sent"
    assert record.due_at == pytest.approx(now - 1, abs=1e-3)
    assert record.updated_at >= failed_at.updated_at
    assert storage.count_by_state()[JobState.FAILED] == 0
    assert list_jobs(storage, JobState.FAILED, 10) == []
    assert storage.list_jobs_page(JobQuery(state=JobState.FAILED), 10) == []
    assert storage.fetch_due_ids(10) == ["j0"]
    fresh = storage.claim("j0", lock, 30)
    assert fresh is not None and fresh.attempts == 1
    # And the broker message it was stored with is built afresh: the claim brings none back
    assert fresh.envelope is None
    # And a scheduled job's attempts are left alone by a reschedule
    assert storage.unclaim([fresh]) == ["j0"]
    assert storage.reschedule("j0", now + 60)
    kept = storage.get_job("j0")
    assert kept is not None and kept.attempts == 1


def test_a_claim_with_a_foreign_token_is_neither_backed_off_nor_failed(storage: Storage) -> None:
    _, (claim,) = claimed(storage, 1)
    forged = ClaimedJob(claim.id, claim.task, claim.payload, claim.due_at, 1, claim.token + 1000)
    assert storage.back_off([forged], "x", 60.0) == []
    assert storage.fail([forged], "x") == []
    record = storage.get_job(claim.id)
    assert record is not None and record.state is JobState.CLAIMED
    # And settled once, a claim cannot be settled again
    assert storage.fail([claim], "x") == [claim.id]
    assert storage.back_off([claim], "x", 60.0) == []
    assert storage.mark_enqueued([claim]) == []


@pytest.mark.parametrize("delay", [0.0, -1.0, math.nan, math.inf, True])
def test_a_back_off_without_a_positive_delay_is_refused(storage: Storage, delay: float) -> None:
    _, (claim,) = claimed(storage, 1)
    with pytest.raises(InvalidArgumentError):
        storage.back_off([claim], "x", delay)
    record = storage.get_job(claim.id)
    assert record is not None and record.state is JobState.CLAIMED
