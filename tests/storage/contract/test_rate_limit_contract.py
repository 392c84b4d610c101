"""Rate limits of a queue or a task in the storage contract (``RateLimitStore``), run against
every adapter kind: limits are set, replaced, listed and removed; bad input is refused before
anything is written; the slots a reservation hands out are those of the generic cell rate
algorithm, checked against an independent oracle, and racing reservations never spend one slot
twice; deferred claims wait, due at their slots, and claims carry the queue they were stored
with."""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    InvalidArgumentError,
    JobState,
    NewJob,
    PauseKind,
    RateLimitRecord,
    Storage,
)
from tests.storage.due_jobs import add_due, take_lock

QUEUE, TASK = PauseKind.QUEUE, PauseKind.TASK
#: Slots are sums of float seconds since the epoch (about 1.7e9, whose float step is 2.4e-7).
TOLERANCE = 1e-3


def job(job_id: str, due_at: float, queue: str | None = None) -> NewJob:
    return NewJob(id=job_id, task="tasks.mail", payload="{}", due_at=due_at, queue=queue)


def limit_of(storage: Storage, kind: PauseKind, name: str) -> RateLimitRecord:
    (found,) = [r for r in storage.list_rate_limits() if (r.kind, r.name) == (kind, name)]
    return found


# -- setting, listing, removing ---------------------------------------------------------------


def test_a_limit_is_set_listed_replaced_and_removed(storage: Storage) -> None:
    # Given limits on a task and on two queues, set out of order
    storage.set_rate_limit(TASK, "tasks.mail", 3, 60, 1, "")
    storage.set_rate_limit(QUEUE, "reports", 1, 0.5, 1, "bob")
    storage.set_rate_limit(QUEUE, "emails", 10, 1.0, 5, "ann")
    # Then they are listed by (kind, name) with their numbers, none of them spent yet
    listed = storage.list_rate_limits()
    assert [(r.kind, r.name) for r in listed] == [
        (QUEUE, "emails"),
        (QUEUE, "reports"),
        (TASK, "tasks.mail"),
    ]
    emails = listed[0]
    assert (emails.count, emails.period, emails.burst, emails.set_by) == (10, 1.0, 5, "ann")
    assert emails.set_at == pytest.approx(storage.now(), abs=5)
    assert all(r.free_at is None for r in listed)
    assert isinstance(listed[1].period, float) and listed[1].period == 0.5
    # When one is set again
    storage.set_rate_limit(QUEUE, "emails", 20, 2.0, 2, "carol")
    # Then its numbers and who set it are replaced, and when it was first set is kept
    after = limit_of(storage, QUEUE, "emails")
    assert (after.count, after.period, after.burst, after.set_by) == (20, 2.0, 2, "carol")
    assert after.set_at == pytest.approx(emails.set_at, abs=1e-3)
    # And removing ends it, once
    assert storage.remove_rate_limit(QUEUE, "emails") is True
    assert storage.remove_rate_limit(QUEUE, "emails") is False
    assert storage.reserve_release_slots(QUEUE, "emails", 1) is None
    assert [(r.kind, r.name) for r in storage.list_rate_limits()] == [
        (QUEUE, "reports"),
        (TASK, "tasks.mail"),
    ]


def test_a_queue_and_a_task_of_one_name_are_two_limits(storage: Storage) -> None:
    storage.set_rate_limit(QUEUE, "mail", 1, 1.0, 1, "")
    storage.set_rate_limit(TASK, "mail", 2, 1.0, 1, "")
    assert [(r.kind, r.count) for r in storage.list_rate_limits()] == [(QUEUE, 1), (TASK, 2)]
    assert storage.remove_rate_limit(TASK, "mail") is True
    assert [r.kind for r in storage.list_rate_limits()] == [QUEUE]


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("kind", "name", "count", "period", "burst", "set_by"),
    [
        pytest.param("topic", "emails", 10, 1.0, 1, "", id="kind"),
        pytest.param(QUEUE, "", 10, 1.0, 1, "", id="empty-name"),
        pytest.param(QUEUE, "x" * 256, 10, 1.0, 1, "", id="long-name"),
        pytest.param(TASK, " tasks.mail", 10, 1.0, 1, "", id="spaced-name"),
        pytest.param(TASK, "tasks\nmail", 10, 1.0, 1, "", id="unprintable-name"),
        pytest.param(QUEUE, 42, 10, 1.0, 1, "", id="name-not-a-string"),
        pytest.param(QUEUE, "emails", 0, 1.0, 1, "", id="count-0"),
        pytest.param(QUEUE, "emails", -1, 1.0, 1, "", id="count-negative"),
        pytest.param(QUEUE, "emails", True, 1.0, 1, "", id="count-bool"),
        pytest.param(QUEUE, "emails", 1.5, 1.0, 1, "", id="count-float"),
        pytest.param(QUEUE, "emails", 1_000_001, 86_400, 1, "", id="count-too-big"),
        pytest.param(QUEUE, "emails", 10, 0, 1, "", id="period-0"),
        pytest.param(QUEUE, "emails", 10, -1.0, 1, "", id="period-negative"),
        pytest.param(QUEUE, "emails", 10, math.inf, 1, "", id="period-inf"),
        pytest.param(QUEUE, "emails", 10, math.nan, 1, "", id="period-nan"),
        pytest.param(QUEUE, "emails", 10, 86_400.5, 1, "", id="period-too-long"),
        pytest.param(QUEUE, "emails", 10, "1", 1, "", id="period-not-a-number"),
        pytest.param(QUEUE, "emails", 10, True, 1, "", id="period-bool"),
        pytest.param(QUEUE, "emails", 10, 1.0, 0, "", id="burst-0"),
        pytest.param(QUEUE, "emails", 10, 1.0, 1_000_001, "", id="burst-too-big"),
        pytest.param(QUEUE, "emails", 10, 1.0, 1, "b" * 256, id="set-by-too-long"),
        pytest.param(QUEUE, "emails", 10, 1.0, 1, None, id="set-by-not-a-string"),
        pytest.param(QUEUE, "emails", 1_000_000, 0.5, 1, "", id="over-a-million-a-second"),
    ],
)
def test_a_bad_limit_is_refused_and_nothing_written(
    storage: Storage,
    kind: object,
    name: object,
    count: object,
    period: object,
    burst: object,
    set_by: object,
) -> None:
    with pytest.raises(InvalidArgumentError):
        storage.set_rate_limit(kind, name, count, period, burst, set_by)  # type: ignore[arg-type]
    assert storage.list_rate_limits() == []


def test_the_bounds_themselves_are_accepted(storage: Storage) -> None:
    storage.set_rate_limit(QUEUE, "edge", 1_000_000, 1.0, 1_000_000, "x" * 255)
    storage.set_rate_limit(TASK, "slow", 1, 86_400, 1, "")
    assert [(r.name, r.count, r.period) for r in storage.list_rate_limits()] == [
        ("edge", 1_000_000, 1.0),
        ("slow", 1, 86_400.0),
    ]


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("kind", "name", "count"),
    [
        ("topic", "emails", 1),
        (QUEUE, "", 1),
        (QUEUE, "emails", 0),
        (QUEUE, "emails", -1),
        (QUEUE, "emails", True),
        (QUEUE, "emails", 1.0),
        (QUEUE, "emails", 100_001),
    ],
)
def test_a_bad_reservation_or_removal_is_refused(
    storage: Storage, kind: object, name: object, count: object
) -> None:
    with pytest.raises(InvalidArgumentError):
        storage.reserve_release_slots(kind, name, count)  # type: ignore[arg-type]
    if (kind, name) != (QUEUE, "emails"):  # a bad limit's name: removing it is refused too
        with pytest.raises(InvalidArgumentError):
            storage.remove_rate_limit(kind, name)  # type: ignore[arg-type]
    assert storage.list_rate_limits() == []


@pytest.mark.untouched
def test_a_reservation_of_no_limit_is_none(storage: Storage) -> None:
    assert storage.reserve_release_slots(QUEUE, "emails", 5) is None
    assert storage.reserve_release_slots(TASK, "tasks.mail", 1) is None
    assert storage.list_rate_limits() == []


# -- reserving slots --------------------------------------------------------------------------


def expected_slots(now: float, first: int, wanted: int, interval: float, burst: int) -> list[float]:
    """The oracle, for reservations made at one instant ``now`` of a limit never used before:
    the ``k``-th slot ever handed out (from 0) is free at once for the first ``burst``, then one
    ``interval`` apart."""
    return [now + max(0, k - burst + 1) * interval for k in range(first, first + wanted)]


def test_slots_come_at_once_for_a_burst_then_one_interval_apart(storage: Storage) -> None:
    # Given a limit of 4 per 2 s (an interval of 0.5 s) with a burst of 3, never used
    storage.set_rate_limit(QUEUE, "emails", 4, 2.0, 3, "")
    # When 10 slots are reserved
    first = storage.reserve_release_slots(QUEUE, "emails", 10)
    # Then the first 3 are free at once and the others follow one interval apart
    assert first is not None
    assert first.now == pytest.approx(storage.now(), abs=5)
    assert list(first.slots) == pytest.approx(
        expected_slots(first.now, 0, 10, 0.5, 3), abs=TOLERANCE
    )
    assert sum(slot <= first.now for slot in first.slots) == 3
    # And a second reservation continues where the first ended (moments later, so the same
    # instant as far as slots seconds apart are concerned)
    second = storage.reserve_release_slots(QUEUE, "emails", 5)
    assert second is not None and second.now >= first.now - TOLERANCE
    assert list(second.slots) == pytest.approx(
        expected_slots(first.now, 10, 5, 0.5, 3), abs=TOLERANCE
    )
    # And the listing says when the next job may go: the 16th slot
    (listed,) = storage.list_rate_limits()
    assert listed.free_at == pytest.approx(first.now + (15 - 3 + 1) * 0.5, abs=TOLERANCE)


def test_one_slot_at_a_time_is_the_same_sequence(storage: Storage) -> None:
    storage.set_rate_limit(TASK, "tasks.mail", 1, 3600.0, 2, "")
    reservations = [storage.reserve_release_slots(TASK, "tasks.mail", 1) for _ in range(4)]
    assert all(r is not None and len(r.slots) == 1 for r in reservations)
    start = reservations[0].now  # type: ignore[union-attr]
    slots = [r.slots[0] for r in reservations if r is not None]
    assert slots == pytest.approx(expected_slots(start, 0, 4, 3600.0, 2), abs=1.0)


def test_replacing_a_limit_keeps_the_slots_reserved(storage: Storage) -> None:
    storage.set_rate_limit(QUEUE, "emails", 1, 100.0, 1, "")
    first = storage.reserve_release_slots(QUEUE, "emails", 2)
    assert first is not None
    storage.set_rate_limit(QUEUE, "emails", 1, 10.0, 1, "faster")
    # the next slot is still after the ones reserved: the reserved budget is not handed out again
    after = storage.reserve_release_slots(QUEUE, "emails", 1)
    assert after is not None
    assert after.slots[0] == pytest.approx(first.now + 200.0, abs=TOLERANCE)


def test_racing_reservations_never_spend_a_slot_twice(storage: Storage) -> None:
    # Given a limit of 10 a second, no burst, and four schedulers reserving at once
    storage.set_rate_limit(QUEUE, "emails", 10, 1.0, 1, "")
    start = threading.Barrier(4)
    taken: list[list[float]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def reserve(n: int) -> None:
        try:
            start.wait()
            for _ in range(5):
                reservation = storage.reserve_release_slots(QUEUE, "emails", 5)
                assert reservation is not None
                taken[n].extend(reservation.slots)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=reserve, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Then the 100 slots are distinct and, in order, each at least an interval after the last
    slots = sorted(slot for mine in taken for slot in mine)
    assert len(slots) == 100 and len(set(slots)) == 100
    gaps = [later - earlier for earlier, later in itertools.pairwise(slots)]
    assert min(gaps) >= 0.1 - 1e-6


# -- deferring claims -------------------------------------------------------------------------


def test_deferred_claims_wait_due_at_their_slots(storage: Storage) -> None:
    # Given three claimed jobs
    now = storage.now()
    storage.add_jobs([job("a", now - 3), job("b", now - 2, queue="emails"), job("c", now - 1)])
    lock = take_lock(storage)
    claims = {claim.id: claim for claim in storage.claim_due(3, lock, lease=30)}
    # When two are deferred to their slots, one soon and one in an hour
    soon, later = storage.now() + 2.0, storage.now() + 3600
    note = "rate limited: queue emails"
    assert storage.defer([claims["a"], claims["b"]], [soon, later], note) == ["a", "b"]
    # Then they are scheduled again at those times, with the attempt uncounted and the note
    for job_id, due_at in (("a", soon), ("b", later)):
        record = storage.get_job(job_id)
        assert record is not None
        assert (record.state, record.attempts, record.last_error) == (JobState.SCHEDULED, 0, note)
        assert record.due_at == pytest.approx(due_at, abs=TOLERANCE)
    claimed = storage.get_job("c")
    assert claimed is not None and claimed.state is JobState.CLAIMED
    # And they are not due until their time comes, then in due order
    assert storage.fetch_due_ids(10) == []
    assert storage.next_due_at() == pytest.approx(soon, abs=TOLERANCE)
    assert wait_until(lambda: storage.fetch_due_ids(10), timeout=30) == ["a"]
    again = storage.claim("a", lock, lease=30)
    assert again is not None and again.attempts == 1
    # And claimed at its slot, the job says it holds it; a job never deferred holds none
    assert again.slot_at == again.due_at
    assert claims["c"].slot_at is None
    # And once its due time moves (rescheduled), the old slot is no longer its own
    assert storage.unclaim([again]) == ["a"] and storage.reschedule("a", storage.now() - 1)
    moved = storage.claim("a", lock, lease=30)
    assert moved is not None and moved.slot_at != moved.due_at


def test_a_deferral_under_a_stale_token_settles_nothing(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 2), job("b", now - 1)])
    held = storage.claim_due(2, take_lock(storage), lease=30)
    stale = [dataclasses.replace(claim, token=claim.token + 1000) for claim in held]
    # When both are deferred under a token that is not theirs, then one under its own
    assert storage.defer(stale, [now + 60, now + 60], "late") == []
    assert storage.defer([stale[0], held[1]], [now + 60, now + 90], "late") == ["b"]
    # Then only that one moved; the other is still claimed as it was
    record = storage.get_job("a")
    assert record is not None
    assert (record.state, record.attempts, record.last_error) == (JobState.CLAIMED, 1, None)
    assert record.due_at == pytest.approx(now - 2, abs=TOLERANCE)
    moved = storage.get_job("b")
    assert moved is not None and moved.state is JobState.SCHEDULED
    assert moved.due_at == pytest.approx(now + 90, abs=TOLERANCE)
    # And a job deferred once is claimed no more: deferring it again settles nothing
    assert storage.defer([held[1]], [now + 120], "again") == []
    assert storage.defer([], [], "nothing") == []


def test_a_deferred_job_of_a_paused_queue_is_held(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs([job("a", now - 1, queue="emails"), job("b", now - 1, queue="other")])
    claims = sorted(storage.claim_due(2, take_lock(storage), lease=30), key=lambda c: c.id)
    storage.pause(QUEUE, "emails", "", "")
    assert storage.defer(claims, [now + 30, now + 30], "limited") == ["a", "b"]
    held = storage.get_job("a")
    assert held is not None and held.state is JobState.HELD
    assert held.due_at == pytest.approx(now + 30, abs=TOLERANCE) and held.attempts == 0
    other = storage.get_job("b")
    assert other is not None and other.state is JobState.SCHEDULED
    assert storage.resume(QUEUE, "emails") == 1
    resumed = storage.get_job("a")
    assert resumed is not None and resumed.state is JobState.SCHEDULED


def test_requeueing_makes_the_waiting_jobs_due_now_in_slot_order(storage: Storage) -> None:
    # Given a limit of one job a 100 s on queue "emails", whose slots four claimed jobs
    # reserved: the first goes, the others wait at 100, 200 and 300 s, one of them held by a
    # pause of its task; and beside them a job of another queue waiting for a slot of its own,
    # and a job of "emails" merely due later
    storage.set_rate_limit(QUEUE, "emails", 1, 100.0, 1, "")
    now = storage.now()
    storage.add_jobs([job(f"w{n}", now - 4 + n, queue="emails") for n in range(4)])
    beside = [NewJob("x", "tasks.x", "{}", now - 1, queue="emails"), job("other", now - 1, "other")]
    storage.add_jobs([*beside, job("later", now + 500, "emails")])
    lock = take_lock(storage)
    claims = {claim.id: claim for claim in storage.claim_due(10, lock, lease=30)}
    reservation = storage.reserve_release_slots(QUEUE, "emails", 4)
    assert reservation is not None
    waits = {"w1": reservation.slots[1], "w2": reservation.slots[2], "w3": reservation.slots[3]}
    waits |= {"x": now + 150, "other": now + 400}
    storage.pause(TASK, "tasks.x", "", "")
    assert sorted(
        storage.defer([claims[i] for i in waits], list(waits.values()), "wait")
    ) == sorted(waits)
    # When the jobs waiting for the limit of "emails" are requeued
    assert storage.requeue_waiting(QUEUE, "emails") == 4
    # Then they are due now, the scheduled ones in the order of their slots, with no slot or
    # note (the held one still held), and the next reservation starts afresh
    after = storage.now()
    records = {i: storage.get_job(i) for i in ("w1", "x", "w2", "w3", "other", "later")}
    order = [records[i] for i in ("w1", "w2", "w3", "x")]
    assert all(r is not None and now - 1 <= r.due_at <= after + 1 for r in order), order
    due = [r.due_at for r in order[:3] if r is not None]
    assert due == sorted(due) and len(set(due)) == 3, due
    assert all(r is not None and r.last_error is None for r in order)
    held = records["x"]
    assert held is not None and held.state is JobState.HELD
    assert sorted(storage.fetch_due_ids(10)) == ["w1", "w2", "w3"]
    again = storage.claim("w1", lock, lease=30)
    assert again is not None and again.slot_at is None
    fresh = storage.reserve_release_slots(QUEUE, "emails", 1)
    assert fresh is not None and fresh.slots[0] <= fresh.now + TOLERANCE
    # And the other queue's waiting job, and the job merely due later, are as they were
    other, later = records["other"], records["later"]
    assert other is not None and other.due_at == pytest.approx(now + 400, abs=TOLERANCE)
    assert later is not None and later.due_at == pytest.approx(now + 500, abs=TOLERANCE)
    # And requeueing again, or a name with no waiting jobs, moves nothing
    assert storage.requeue_waiting(QUEUE, "emails") == 0
    assert storage.requeue_waiting(TASK, "nothing") == 0


def test_a_deferral_larger_than_a_page_moves_every_job(storage: Storage) -> None:
    ids = add_due(storage, 1_005)
    claims = storage.claim_due(2_000, take_lock(storage), lease=60)
    assert len(claims) == 1_005
    due = storage.now() + 3600
    due_ats = [due + n * 0.01 for n in range(len(claims))]
    assert sorted(storage.defer(claims, due_ats, "limited")) == ids
    assert storage.count_by_state()[JobState.SCHEDULED] == 1_005
    last = storage.get_job(claims[-1].id)
    assert last is not None and last.due_at == pytest.approx(due_ats[-1], abs=TOLERANCE)


# -- what a claim carries ---------------------------------------------------------------------


def test_a_claim_carries_the_queue_its_job_was_stored_with(storage: Storage) -> None:
    now = storage.now()
    storage.add_jobs(
        [job("one", now - 3, queue="emails"), job("two", now - 2), job("three", now - 1, "x")]
    )
    lock = take_lock(storage)
    single = storage.claim("one", lock, lease=30)
    assert single is not None and single.queue == "emails"
    batch = storage.claim_due(10, lock, lease=30)
    assert [(claim.id, claim.queue) for claim in batch] == [("two", None), ("three", "x")]
