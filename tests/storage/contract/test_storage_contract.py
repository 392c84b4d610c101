"""The storage contract, run identically against every adapter on its real server.

Each test is Given / When / Then against the ``Storage`` protocol only, so an adapter that passes
here is interchangeable with every other one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    ClaimedJob,
    InvalidArgumentError,
    InvalidIdentifierError,
    InvalidRecordError,
    JobState,
    LockLease,
    NewJob,
    Storage,
    list_jobs,
)
from tests.storage.due_jobs import LOCK, add_due, take_lock
from tests.together import together


def job(job_id: str, due_at: float, task: str = "tasks.add", payload: str = "{}") -> NewJob:
    return NewJob(id=job_id, task=task, payload=payload, due_at=due_at)


# -- set-up and clock -----------------------------------------------------------------------


def test_setup_is_idempotent(storage: Storage) -> None:
    # Given a set-up storage holding a job
    storage.add_jobs([job("a", storage.now())])
    # When set-up runs again
    storage.setup()
    # Then the job is still there
    assert storage.get_job("a") is not None


def test_now_is_the_servers_epoch_clock(storage: Storage) -> None:
    first = storage.now()
    assert abs(first - time.time()) < 5
    assert storage.now() >= first


# -- accept ---------------------------------------------------------------------------------


def test_added_job_reads_back_unchanged(storage: Storage) -> None:
    # Given a job with a unicode payload and a fractional due time
    due = storage.now() + 3600.123456
    payload = '{"args": [1, "ü→✓"], "kwargs": {}}'
    # When it is added
    assert storage.add_jobs([job("a", due, payload=payload)]) == [True]
    # Then it reads back as scheduled, with no attempts yet
    record = storage.get_job("a")
    assert record is not None
    assert (record.id, record.task, record.payload) == ("a", "tasks.add", payload)
    assert record.due_at == pytest.approx(due, abs=1e-3)
    assert record.state is JobState.SCHEDULED
    assert record.attempts == 0
    assert record.created_at == pytest.approx(storage.now(), abs=5)


def test_add_is_idempotent_on_job_id(storage: Storage) -> None:
    # Given a stored job
    now = storage.now()
    storage.add_jobs([job("a", now + 10, payload='{"v": 1}')])
    # When the same id comes again with other fields, next to a new id
    result = storage.add_jobs([job("a", now + 99, payload='{"v": 2}'), job("b", now)])
    # Then only the new one is stored and the old one is unchanged
    assert result == [False, True]
    record = storage.get_job("a")
    assert record is not None
    assert record.payload == '{"v": 1}'
    assert record.due_at == pytest.approx(now + 10, abs=1e-3)


def test_a_one_job_add_is_idempotent_and_keeps_its_envelope(storage: Storage) -> None:
    # One job per call is its own statement on the SQL adapters (a client's schedule()), so the
    # promises of a bulk add are checked for it on its own: a stored id is not overwritten, and
    # every field, the envelope included, is stored as given.
    now = storage.now()
    assert storage.add_jobs([NewJob("a", "tasks.one", '{"v": 1}', now - 1, "q\n{}")]) == [True]
    assert storage.add_jobs([NewJob("a", "tasks.two", '{"v": 2}', now + 99, None)]) == [False]
    record = storage.get_job("a")
    assert record is not None
    assert (record.task, record.payload, record.state) == (
        "tasks.one",
        '{"v": 1}',
        JobState.SCHEDULED,
    )
    assert record.due_at == pytest.approx(now - 1, abs=1e-3)
    claim = storage.claim("a", take_lock(storage), lease=30)
    assert claim is not None and claim.envelope == "q\n{}"


def test_add_of_an_enqueued_id_changes_nothing(storage: Storage) -> None:
    (job_id,) = add_due(storage, 1)
    claim = storage.claim(job_id, take_lock(storage), lease=30)
    assert claim is not None
    storage.mark_enqueued([claim])
    assert storage.add_jobs([job(job_id, storage.now())]) == [False]
    record = storage.get_job(job_id)
    assert record is not None and record.state is JobState.ENQUEUED


def test_bulk_add_of_many_jobs(storage: Storage) -> None:
    ids = add_due(storage, 2500)
    assert storage.count_by_state()[JobState.SCHEDULED] == len(ids)


@pytest.mark.untouched
@pytest.mark.parametrize(
    "bad_ids",
    [["ok", "ok"], ["ok", ""], ["ok", "x" * 201], ["ok", "has space"], ["ok", "tab\there"]],
)
def test_bad_ids_reject_the_whole_call(storage: Storage, bad_ids: list[str]) -> None:
    # Given an empty store
    # When a call carries a duplicate or invalid id
    with pytest.raises(InvalidRecordError if bad_ids == ["ok", "ok"] else InvalidIdentifierError):
        storage.add_jobs([job(i, storage.now()) for i in bad_ids])
    # Then nothing at all was written
    assert sum(storage.count_by_state().values()) == 0
    assert storage.get_job("ok") is None


def test_invalid_id_error_names_the_problem(storage: Storage) -> None:
    with pytest.raises(InvalidIdentifierError, match="200"):
        storage.add_jobs([job("x" * 201, storage.now())])


@pytest.mark.untouched
@pytest.mark.parametrize("due_at", [float("nan"), float("inf"), float("-inf"), True, "1"])
def test_a_due_time_that_is_not_a_finite_number_is_refused(
    storage: Storage, due_at: object
) -> None:
    with pytest.raises(InvalidArgumentError, match="due_at"):
        storage.add_jobs([job("ok", storage.now()), job("bad", due_at)])  # type: ignore[arg-type]
    assert sum(storage.count_by_state().values()) == 0


def test_any_finite_due_time_is_kept_exactly_and_every_read_survives_it(storage: Storage) -> None:
    # The storage is a leaf and keeps what it is given; the documented range is the core's
    # (parallel_scheduler.ranges), so rows from before that check (or out of it) must still read.
    # Given jobs due far outside the years a date can show, and an ordinary one
    now = storage.now()
    storage.add_jobs([job("far", 1e20), job("early", -1e12), job("now", now)])
    # Then each reads back exactly, in due order, and the earliest is what next_due_at peeks
    assert [(r.id, r.due_at) for r in list_jobs(storage, None, 10)] == [
        ("early", -1e12), ("now", now), ("far", 1e20),
    ]  # fmt: skip
    assert storage.next_due_at() == -1e12
    assert storage.fetch_due_ids(10) == ["early", "now"]
    assert storage.reschedule("far", 2e20)
    far = storage.get_job("far")
    assert far is not None and far.due_at == 2e20
    assert storage.count_by_state()[JobState.SCHEDULED] == 3


# -- fetching due ids -----------------------------------------------------------------------


def test_fetch_due_ids_is_earliest_first_and_bounded(storage: Storage) -> None:
    # Given jobs due in a shuffled order and one in the future
    now = storage.now()
    storage.add_jobs(
        [job("c", now - 1), job("a", now - 3), job("future", now + 3600), job("b", now - 2)]
    )
    # Then only due ids come back, earliest first, at most `limit`
    assert storage.fetch_due_ids(10) == ["a", "b", "c"]
    assert storage.fetch_due_ids(2) == ["a", "b"]


def test_next_due_at_peeks_the_earliest_scheduled(storage: Storage) -> None:
    assert storage.next_due_at() is None
    now = storage.now()
    storage.add_jobs([job("later", now + 60), job("sooner", now + 30)])
    assert storage.next_due_at() == pytest.approx(now + 30, abs=1e-3)
    storage.cancel("sooner")
    assert storage.next_due_at() == pytest.approx(now + 60, abs=1e-3)


def test_next_work_at_is_none_for_an_empty_store_and_the_earliest_due_time(
    storage: Storage,
) -> None:
    # Given no job, then jobs due later in a shuffled order
    assert storage.next_work_at() is None
    now = storage.now()
    storage.add_jobs([job("later", now + 60), job("sooner", now + 30), job("last", now + 90)])
    # Then the scheduler's peek is the earliest due time
    assert storage.next_work_at() == pytest.approx(now + 30, abs=1e-3)
    # And a job already due counts the same way: its due time, in the past
    storage.add_jobs([job("due", now - 5)])
    assert storage.next_work_at() == pytest.approx(now - 5, abs=1e-3)


def test_next_work_at_counts_neither_cancelled_nor_finished_jobs(storage: Storage) -> None:
    # Given jobs due long ago: one cancelled, and two claimed that end Enqueued and Expired
    now = storage.now()
    storage.add_jobs([job("cancelled", now - 100), job("sent", now - 50), job("late", now - 40)])
    assert storage.cancel("cancelled")
    lock = take_lock(storage)
    sent, late = storage.claim("sent", lock, lease=30), storage.claim("late", lock, lease=30)
    assert sent is not None and late is not None
    assert storage.mark_enqueued([sent]) == ["sent"]
    assert storage.expire([late], "expired before release") == ["late"]
    # Then there is no work: finished jobs count neither by due time nor by their old lease
    assert storage.next_work_at() is None


def test_next_work_at_is_the_end_of_the_earliest_claim_lease(storage: Storage) -> None:
    # Given jobs due in an hour, and a job claimed under a short lease by a claimer that stalls
    now = storage.now()
    storage.add_jobs([job("later", now + 3600), job("claimed", now - 1)])
    lock = take_lock(storage, "a", lease=30)
    before = storage.now()
    assert storage.claim("claimed", lock, lease=0.5) is not None
    after = storage.now()
    # Then the peek is when that lease ends (earlier than the due jobs), while it runs ...
    peek = storage.next_work_at()
    assert peek is not None and before + 0.5 - 1e-3 <= peek <= after + 0.5 + 1e-3
    # ... and after it ran out: from then on, recovering the claim is work
    wait_until(lambda: storage.now() > peek, timeout=5)
    assert storage.next_work_at() == peek
    assert storage.recover_expired_claims() == 1
    # And once recovered, the job is due at its old due time again
    assert storage.next_work_at() == pytest.approx(now - 1, abs=1e-3)


def test_next_work_at_takes_the_earlier_of_due_times_and_lease_ends(storage: Storage) -> None:
    # Given a job claimed under a 30-second lease and a job due in 10 seconds
    now = storage.now()
    storage.add_jobs([job("claimed", now - 1)])
    lock = take_lock(storage)
    claim = storage.claim("claimed", lock, lease=30)
    assert claim is not None
    storage.add_jobs([job("soon", now + 10)])
    # Then the due time is earlier, so it is the peek
    assert storage.next_work_at() == pytest.approx(now + 10, abs=1e-3)
    # And once the claim is given back, the job is due again at its old due time
    assert storage.unclaim([claim]) == ["claimed"]
    assert storage.next_work_at() == pytest.approx(now - 1, abs=1e-3)


def test_limit_must_be_positive(storage: Storage) -> None:
    with pytest.raises(InvalidArgumentError, match="limit"):
        storage.fetch_due_ids(0)


# -- the distributed lock -------------------------------------------------------------------


def test_lock_is_exclusive_until_released(storage: Storage) -> None:
    lock = take_lock(storage, "a")
    assert storage.acquire_lock(LOCK, "b", 30) is None
    assert storage.acquire_lock(LOCK, "a", 30) is None, "the lock is not re-entrant"
    holder = storage.lock_holder(LOCK)
    assert holder is not None and (holder.owner, holder.token) == ("a", lock.token)
    assert storage.release_lock(lock)
    assert storage.lock_holder(LOCK) is None
    assert storage.acquire_lock(LOCK, "b", 30) is not None


def test_every_acquisition_gets_a_bigger_fencing_token(storage: Storage) -> None:
    tokens = []
    for owner in ("a", "a", "b"):
        lock = take_lock(storage, owner)
        tokens.append(lock.token)
        storage.release_lock(lock)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_renew_extends_the_lease(storage: Storage) -> None:
    lock = take_lock(storage, "a", lease=5)
    renewed = storage.renew_lock(lock, 60)
    assert renewed is not None
    assert renewed.token == lock.token
    assert renewed.expires_at > lock.expires_at + 30


def test_expired_lock_is_taken_over_and_the_stale_holder_is_fenced(storage: Storage) -> None:
    # Given a holder whose short lease runs out
    stale = take_lock(storage, "a", lease=0.3)
    # When another owner takes the lock once it has expired
    fresh = wait_until(lambda: storage.acquire_lock(LOCK, "b", 30), timeout=5)
    # Then the stale holder can neither renew nor release it, nor claim with it
    assert fresh.token > stale.token
    assert storage.renew_lock(stale, 30) is None
    assert not storage.release_lock(stale)
    (job_id,) = add_due(storage, 1)
    assert storage.claim(job_id, stale, lease=30) is None
    assert storage.claim_due(10, stale, lease=30) == []
    holder = storage.lock_holder(LOCK)
    assert holder is not None and holder.owner == "b"


def test_locks_with_different_names_are_independent(storage: Storage) -> None:
    take_lock(storage, "a")
    assert storage.acquire_lock("recurring-scheduler", "b", 30) is not None


# -- claiming -------------------------------------------------------------------------------


def test_claim_takes_a_due_job_out_of_the_due_set(storage: Storage) -> None:
    # Given a due job and the scheduler lock
    (job_id,) = add_due(storage, 1)
    lock = take_lock(storage)
    # When it is claimed
    claim = storage.claim(job_id, lock, lease=30)
    # Then the claim carries the payload, the first attempt and the fencing token
    assert claim is not None
    assert (claim.id, claim.task, claim.attempts, claim.token) == (
        job_id,
        "tasks.t",
        1,
        lock.token,
    )
    record = storage.get_job(job_id)
    assert record is not None and record.state is JobState.CLAIMED
    assert storage.fetch_due_ids(10) == []
    assert storage.claim(job_id, lock, lease=30) is None


def test_claim_refuses_jobs_not_due_or_not_scheduled(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("future", now + 3600), job("cancelled", now - 1)])
    storage.cancel("cancelled")
    lock = take_lock(storage)
    assert storage.claim("future", lock, lease=30) is None
    assert storage.claim("cancelled", lock, lease=30) is None
    assert storage.claim("missing", lock, lease=30) is None


def test_two_claimers_never_claim_the_same_job(storage: Storage) -> None:
    # Given 200 due jobs and two threads released together by a barrier, each claiming every id
    ids = add_due(storage, 200)
    lock = take_lock(storage)

    def claim_all(_: int) -> list[str]:
        return [c.id for i in ids if (c := storage.claim(i, lock, lease=30)) is not None]

    first, second = together(claim_all, range(2))
    # Then every job was claimed exactly once in total
    assert not set(first) & set(second)
    assert sorted(first + second) == ids


def test_claim_due_claims_a_batch_earliest_first(storage: Storage) -> None:
    ids = add_due(storage, 30)
    storage.add_jobs([job("future", storage.now() + 3600)])
    lock = take_lock(storage)
    batch = storage.claim_due(20, lock, lease=30)
    assert [c.id for c in batch] == ids[:20]
    assert all(c.token == lock.token and c.attempts == 1 for c in batch)
    assert [c.id for c in storage.claim_due(20, lock, lease=30)] == ids[20:]
    assert storage.claim_due(20, lock, lease=30) == []


def test_an_envelope_built_at_accept_comes_back_with_every_claim(storage: Storage) -> None:
    # Given due jobs, two with a broker message built at accept time and one without
    now = storage.now()
    envelopes = {"e1": "queue-a\n{}", "e2": "queue-b\n" + "x" * 5000}
    first = NewJob("e1", "t", "{}", now - 3, envelopes["e1"])
    last = NewJob("e2", "t", "{}", now - 1, envelopes["e2"])
    storage.add_jobs([first, job("plain", now - 2), last])
    lock = take_lock(storage)
    # When one is claimed alone and the rest as a batch
    single = storage.claim("e1", lock, 30)
    batch = storage.claim_due(10, lock, 30)
    # Then each claim carries its own envelope unchanged, and None where there was none
    assert single is not None and single.envelope == envelopes["e1"]
    assert [(c.id, c.envelope) for c in batch] == [("plain", None), ("e2", envelopes["e2"])]


def test_an_empty_envelope_is_refused(storage: Storage) -> None:
    with pytest.raises(InvalidRecordError, match="envelope"):
        storage.add_jobs([NewJob("a", "t", "{}", storage.now(), "")])
    assert storage.get_job("a") is None


def test_concurrent_batch_claims_never_overlap(storage: Storage) -> None:
    ids = add_due(storage, 1000)
    lock = take_lock(storage)

    def drain(_: int) -> list[str]:
        got: list[str] = []
        while batch := storage.claim_due(50, lock, lease=30):
            got.extend(c.id for c in batch)
        return got

    results = together(drain, range(3))
    claimed = [i for r in results for i in r]
    assert len(claimed) == len(set(claimed)) == len(ids)


# -- finishing a claim ----------------------------------------------------------------------


def claimed(storage: Storage, count: int = 1) -> tuple[LockLease, list[ClaimedJob]]:
    add_due(storage, count)
    lock = take_lock(storage)
    return lock, storage.claim_due(count, lock, lease=30)


def test_mark_enqueued_ends_the_job(storage: Storage) -> None:
    _, claims = claimed(storage, 3)
    assert sorted(storage.mark_enqueued(claims)) == sorted(c.id for c in claims)
    counts = storage.count_by_state()
    assert counts[JobState.ENQUEUED] == 3
    assert counts[JobState.CLAIMED] == 0
    # A second acknowledgement finds nothing to do
    assert storage.mark_enqueued(claims) == []


def test_unclaim_makes_the_job_due_again_with_its_error(storage: Storage) -> None:
    lock, (claim,) = claimed(storage)
    assert storage.unclaim([claim], error="broker down") == [claim.id]
    record = storage.get_job(claim.id)
    assert record is not None
    assert record.state is JobState.SCHEDULED
    assert record.last_error == "broker down"
    assert record.due_at == pytest.approx(claim.due_at, abs=1e-3)
    assert storage.fetch_due_ids(10) == [claim.id]
    # The next claim counts the second attempt
    again = storage.claim(claim.id, lock, lease=30)
    assert again is not None and again.attempts == 2


def test_expire_ends_the_job_without_enqueueing(storage: Storage) -> None:
    _, (claim,) = claimed(storage)
    assert storage.expire([claim], reason="expired before release") == [claim.id]
    record = storage.get_job(claim.id)
    assert record is not None and record.state is JobState.EXPIRED
    assert storage.count_by_state()[JobState.ENQUEUED] == 0


def test_a_claim_with_a_foreign_token_is_refused(storage: Storage) -> None:
    _, (claim,) = claimed(storage)
    forged = ClaimedJob(claim.id, claim.task, claim.payload, claim.due_at, 1, claim.token + 1000)
    assert storage.mark_enqueued([forged]) == []
    assert storage.unclaim([forged]) == []
    record = storage.get_job(claim.id)
    assert record is not None and record.state is JobState.CLAIMED


def test_expired_claims_are_recovered_and_the_old_claim_is_fenced(storage: Storage) -> None:
    # Given a job claimed under a short lease by a claimer that then stalls
    (job_id,) = add_due(storage, 1)
    stale_claim = storage.claim(job_id, take_lock(storage, "a", lease=0.3), lease=0.3)
    assert stale_claim is not None
    # When the lease runs out and the next lock holder recovers claims
    wait_until(lambda: storage.recover_expired_claims() == 1, timeout=5)
    # Then the job is due again, and re-claimed under a new token
    assert storage.fetch_due_ids(10) == [job_id]
    new_lock = wait_until(lambda: storage.acquire_lock(LOCK, "b", 30), timeout=5)
    fresh_claim = storage.claim(job_id, new_lock, lease=30)
    assert fresh_claim is not None and fresh_claim.token > stale_claim.token
    # And the stalled claimer's acknowledgement changes nothing
    assert storage.mark_enqueued([stale_claim]) == []
    assert storage.mark_enqueued([fresh_claim]) == [job_id]


def test_live_claims_are_not_recovered(storage: Storage) -> None:
    claimed(storage, 2)
    assert storage.recover_expired_claims() == 0
    assert storage.count_by_state()[JobState.CLAIMED] == 2


# -- management -----------------------------------------------------------------------------


def test_cancel_only_scheduled_jobs(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now + 60)])
    assert storage.cancel("a")
    record = storage.get_job("a")
    assert record is not None and record.state is JobState.CANCELLED
    assert not storage.cancel("a")
    assert not storage.cancel("missing")
    assert storage.next_due_at() is None
    _, (claim,) = claimed(storage)
    assert not storage.cancel(claim.id)


def test_reschedule_moves_the_due_time(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now + 3600)])
    assert storage.fetch_due_ids(10) == []
    assert storage.reschedule("a", now - 1)
    assert storage.fetch_due_ids(10) == ["a"]
    record = storage.get_job("a")
    assert record is not None and record.due_at == pytest.approx(now - 1, abs=1e-3)
    assert not storage.reschedule("missing", now)
    storage.cancel("a")
    assert not storage.reschedule("a", now)


def test_count_by_state_covers_every_state(storage: Storage) -> None:
    assert storage.count_by_state() == dict.fromkeys(JobState, 0)
    now = storage.now()
    storage.add_jobs([job("a", now + 60), job("b", now + 60)])
    storage.cancel("b")
    counts = storage.count_by_state()
    assert counts[JobState.SCHEDULED] == 1
    assert counts[JobState.CANCELLED] == 1


def test_list_jobs_by_state_in_due_order_with_paging(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job(f"s{i}", now + 100 - i) for i in range(5)] + [job("c", now)])
    storage.cancel("c")
    scheduled = list_jobs(storage, JobState.SCHEDULED, limit=10)
    assert [r.id for r in scheduled] == ["s4", "s3", "s2", "s1", "s0"]
    assert [r.id for r in list_jobs(storage, JobState.SCHEDULED, limit=2, offset=2)] == ["s2", "s1"]
    assert [r.id for r in list_jobs(storage, JobState.CANCELLED, limit=10)] == ["c"]
    assert [r.id for r in list_jobs(storage, None, limit=10)] == ["c", "s4", "s3", "s2", "s1", "s0"]


def test_an_offset_listing_walks_keyset_pages_across_their_edges(storage: Storage) -> None:
    """2,500 jobs, ties on due time included, listed past two page edges: each job once, in
    (due_at, id) order, the same as sorting the accepted jobs."""
    now = storage.now()
    jobs = [job(f"k{i:04d}", now + 1000 + i // 3) for i in range(2500)]
    storage.add_jobs(jobs)
    expected = [j.id for j in sorted(jobs, key=lambda j: (j.due_at, j.id))]
    listed = list_jobs(storage, JobState.SCHEDULED, limit=1100, offset=950)
    assert [r.id for r in listed] == expected[950:2050]
    assert [r.id for r in list_jobs(storage, None, limit=5000)] == expected


def test_separate_prefixes_do_not_see_each_other(make_storage: Callable[[], Storage]) -> None:
    # Two storages with one prefix share state (as scheduler processes do)
    first, second = make_storage(), make_storage()
    first.add_jobs([job("a", first.now())])
    assert second.get_job("a") is not None
