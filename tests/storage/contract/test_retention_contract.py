"""Retention in the storage contract (``RetentionStore``), run against every adapter: a purge
deletes only finished jobs of the states asked, finished before the cutoff, oldest first, never
more than its limit, and the jobs leave every listing and count with their records."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from devtools.waiting import wait_until
from storage_adapters import (
    InvalidArgumentError,
    JobState,
    LockLease,
    NewJob,
    Storage,
    list_jobs,
    shard_of,
    shards_of,
)
from storage_adapters.checks.retention import PURGEABLE_STATES

LOCK = "delayed-scheduler"


def take_lock(storage: Storage) -> LockLease:
    lock = storage.acquire_lock(LOCK, "scheduler-a", 30)
    assert lock is not None
    return lock


def cancelled(storage: Storage, ids: list[str]) -> list[str]:
    """Store ``ids`` far in the future and cancel them one by one, each strictly after the last
    on the storage clock, so their finish times (``updated_at``) are in the order of ``ids``."""
    now = storage.now()
    storage.add_jobs([NewJob(id=i, task="t", payload="{}", due_at=now + 3600) for i in ids])
    for job_id in ids:
        assert storage.cancel(job_id)
        finished = storage.get_job(job_id)
        assert finished is not None
        wait_until(after(storage, finished.updated_at), timeout=5)
    return ids


def after(storage: Storage, moment: float) -> Callable[[], bool]:
    """A condition: the storage clock has passed ``moment``."""
    return lambda: storage.now() > moment


def released(storage: Storage, ids: list[str], state: JobState) -> list[str]:
    """Store ``ids`` due now, claim them and end them as ``state`` (enqueued or expired)."""
    now = storage.now()
    storage.add_jobs([NewJob(id=i, task="t", payload="{}", due_at=now - 10) for i in ids])
    claims = storage.claim_due(len(ids), take_lock(storage), 30)
    assert sorted(c.id for c in claims) == sorted(ids)
    ended = (
        storage.mark_enqueued(claims)
        if state is JobState.ENQUEUED
        else storage.expire(claims, "too late")
    )
    assert sorted(ended) == sorted(ids)
    storage.release_lock(take_lock_holder(storage))
    return ids


def take_lock_holder(storage: Storage) -> LockLease:
    holder = storage.lock_holder(LOCK)
    assert holder is not None
    return holder


def present(storage: Storage, ids: list[str]) -> list[str]:
    return [i for i in ids if storage.get_job(i) is not None]


def after_now(storage: Storage) -> float:
    """A cutoff after every finish so far (``older_than`` is exclusive)."""
    mark = storage.now()
    wait_until(lambda: storage.now() > mark, timeout=5)
    return storage.now()


def oldest_gone_first(storage: Storage, ids: list[str]) -> bool:
    """True when the jobs left of ``ids`` (finished in that order) are the newest ones: of the
    whole store, or, in a sharded store, of each shard (which purges oldest first on its own)."""
    shards = len(shards_of(storage))
    left = set(present(storage, ids))
    for shard in range(shards):
        mine = [i for i in ids if shard_of(i, shards) == shard]
        kept = [i for i in mine if i in left]
        if kept != mine[len(mine) - len(kept) :]:
            return False
    return True


def test_a_purge_deletes_at_most_limit_jobs_oldest_first(storage: Storage) -> None:
    # Given five cancelled jobs, finished in order
    ids = cancelled(storage, [f"c{i}" for i in range(5)])
    cutoff = after_now(storage)
    # When two purges of at most two run
    assert storage.purge_finished([JobState.CANCELLED], cutoff, 2) == 2
    # Then the two oldest went first (of each shard, in a sharded store)
    assert len(present(storage, ids)) == 3
    assert oldest_gone_first(storage, ids)
    assert storage.purge_finished([JobState.CANCELLED], cutoff, 2) == 2
    assert len(present(storage, ids)) == 1
    assert oldest_gone_first(storage, ids)
    # And the last purge finds one, then none
    assert storage.purge_finished([JobState.CANCELLED], cutoff, 2) == 1
    assert storage.purge_finished([JobState.CANCELLED], cutoff, 2) == 0
    assert storage.count_by_state()[JobState.CANCELLED] == 0
    assert list_jobs(storage, None, 100) == []


def test_only_jobs_finished_before_the_cutoff_are_purged(storage: Storage) -> None:
    # Given jobs cancelled before a moment and jobs cancelled after it
    old = cancelled(storage, ["old1", "old2"])
    cutoff = after_now(storage)
    new = cancelled(storage, ["new1", "new2"])
    # When a purge of everything older than the moment runs
    assert storage.purge_finished([JobState.CANCELLED], cutoff, 100) == 2
    # Then only the old ones are gone
    assert present(storage, old + new) == new
    assert storage.count_by_state()[JobState.CANCELLED] == 2


def test_only_the_states_asked_are_purged(storage: Storage) -> None:
    # Given jobs in every finished state
    done = released(storage, ["e1", "e2"], JobState.ENQUEUED)
    late = released(storage, ["x1"], JobState.EXPIRED)
    gone = cancelled(storage, ["c1"])
    cutoff = after_now(storage)
    # When only the cancelled and expired are purged
    assert storage.purge_finished(["cancelled", JobState.EXPIRED], cutoff, 100) == 2
    # Then the enqueued ones stay, the others left every listing
    assert present(storage, done + late + gone) == done
    counts = storage.count_by_state()
    assert (counts[JobState.ENQUEUED], counts[JobState.EXPIRED], counts[JobState.CANCELLED]) == (
        2,
        0,
        0,
    )
    assert list_jobs(storage, JobState.EXPIRED, 10) == []
    # And the enqueued ones go when asked
    assert storage.purge_finished([JobState.ENQUEUED], cutoff, 100) == 2
    assert sum(storage.count_by_state().values()) == 0


def test_scheduled_and_claimed_jobs_are_never_purged(storage: Storage) -> None:
    # Given a scheduled job, a claimed one and a finished one
    now = storage.now()
    storage.add_jobs([NewJob(id="due", task="t", payload="{}", due_at=now - 5)])
    storage.add_jobs([NewJob(id="later", task="t", payload="{}", due_at=now + 3600)])
    assert [c.id for c in storage.claim_due(10, take_lock(storage), 30)] == ["due"]
    cancelled(storage, ["c"])
    # When every finished state is purged with a cutoff far ahead
    purged = storage.purge_finished(PURGEABLE_STATES, storage.now() + 3600, 100)
    # Then only the finished job went
    assert purged == 1
    assert present(storage, ["due", "later", "c"]) == ["due", "later"]


@pytest.mark.parametrize("state", [JobState.SCHEDULED, JobState.CLAIMED, "running"])
def test_a_purge_of_an_unfinished_or_unknown_state_is_refused(
    storage: Storage, state: JobState | str
) -> None:
    # Given a finished job
    cancelled(storage, ["c"])
    # When a purge also names a state that is not finished, Then it is refused, naming it
    with pytest.raises(InvalidArgumentError, match=str(getattr(state, "value", state))):
        storage.purge_finished([JobState.CANCELLED, state], storage.now() + 10, 10)
    # And nothing was deleted
    assert present(storage, ["c"]) == ["c"]


@pytest.mark.untouched
@pytest.mark.parametrize(
    ("states", "older_than", "limit", "problem"),
    [
        ([], 1.0, 1, "at least one"),
        (["cancelled"], float("nan"), 1, "older_than"),
        (["cancelled"], 1.0, 0, "limit"),
        (["cancelled"], 1.0, True, "limit"),
    ],
)
def test_bad_purge_arguments_are_refused(
    storage: Storage, states: list[str], older_than: float, limit: int, problem: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        storage.purge_finished(states, older_than, limit)
