"""The chunked recurring calls of the storage contract (``fire_recurring_many``,
``save_recurring_many``), run identically against every adapter."""

from __future__ import annotations

import pytest

from storage_adapters import JobState, PlannedFiring, RecurringRecord, Storage
from storage_adapters.errors import (
    InvalidArgumentError,
    InvalidRecordError,
    RecordExistsError,
    RecordNotFoundError,
)
from tests.storage.contract.test_recurring_contract import firing, recurring, take_lock


def stored(storage: Storage, rid: str) -> RecurringRecord:
    record = storage.get_recurring(rid)
    assert record is not None, rid
    return record


def planned_from(
    storage: Storage, ids: list[str], tick: float, next_run_at: float
) -> list[PlannedFiring]:
    """Each of ``ids`` planned to fire ``tick`` from its stored version."""
    return [
        PlannedFiring(rid, stored(storage, rid).version, firing(rid, tick, next_run_at))
        for rid in ids
    ]


def test_a_chunk_fires_each_fresh_job_and_refuses_each_stale_one(storage: Storage) -> None:
    now = storage.now()
    ids = [f"r{i:03d}" for i in range(40)]
    storage.save_recurring_many([recurring(rid, now - 1) for rid in ids], "create")
    versions = {rid: stored(storage, rid).version for rid in ids}
    lock = take_lock(storage)
    # every third one planned from a version that is no longer stored
    planned = [
        PlannedFiring(rid, versions[rid] + (n % 3 == 0), firing(rid, now - 1, now + 60))
        for n, rid in enumerate(ids)
    ]
    results = storage.fire_recurring_many(lock, planned)
    assert results == [None if n % 3 == 0 else [True] for n in range(len(ids))]
    for n, rid in enumerate(ids):
        after = stored(storage, rid)
        if n % 3 == 0:  # untouched: same version, same next run, no firing job
            assert after.version == versions[rid]
            assert after.next_run_at == pytest.approx(now - 1, abs=1e-3)
            assert storage.get_job(planned[n].firing.jobs[0].id) is None
        else:
            assert after.version == versions[rid] + 1
            assert after.next_run_at == pytest.approx(now + 60, abs=1e-3)
            job = storage.get_job(planned[n].firing.jobs[0].id)
            assert job is not None and job.state is JobState.SCHEDULED


def test_a_repeated_chunk_creates_nothing_twice(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring_many([recurring("a", now - 1), recurring("b", now - 1)], "create")
    lock = take_lock(storage)
    planned = planned_from(storage, ["a", "b"], now - 1, now + 60)
    assert storage.fire_recurring_many(lock, planned) == [[True], [True]]
    # The same ticks again from the new versions (a retry after a lost reply): advanced, and
    # each firing job reported as existing, never created twice.
    planned = planned_from(storage, ["a", "b"], now - 1, now + 120)
    assert storage.fire_recurring_many(lock, planned) == [[False], [False]]
    assert storage.count_by_state()[JobState.SCHEDULED] == 2


def test_a_chunk_under_a_stale_lease_writes_nothing(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring_many([recurring("a", now - 1), recurring("b", now - 1)], "create")
    lock = take_lock(storage)
    storage.release_lock(lock)
    planned = planned_from(storage, ["a", "b"], now - 1, now + 60)
    assert storage.fire_recurring_many(lock, planned) == [None, None]
    assert storage.count_by_state()[JobState.SCHEDULED] == 0
    assert [stored(storage, rid).version for rid in ("a", "b")] == [1, 1]


def test_a_chunk_naming_one_recurring_job_twice_is_refused_whole(storage: Storage) -> None:
    now = storage.now()
    storage.save_recurring(recurring("a", now - 1), "create")
    record = stored(storage, "a")
    lock = take_lock(storage)
    planned = [
        PlannedFiring("a", record.version, firing("a", now - 1, now + 60)),
        PlannedFiring("a", record.version, firing("a", now - 2, now + 60)),
    ]
    with pytest.raises(InvalidRecordError, match="'a' appears twice"):
        storage.fire_recurring_many(lock, planned)
    assert stored(storage, "a").version == record.version


def test_an_empty_chunk_is_nothing(storage: Storage) -> None:
    assert storage.fire_recurring_many(take_lock(storage), []) == []
    assert storage.save_recurring_many([], "create") == []


def test_save_many_creates_and_replaces_in_one_call(storage: Storage) -> None:
    now = storage.now()
    assert (
        storage.save_recurring_many(
            [recurring(f"r{i:04d}", now + 60) for i in range(1_500)], "create"
        )
        == [True] * 1_500
    )
    assert storage.count_recurring() == 1_500
    upserted = [recurring("r0001", now + 30, task="tasks.other"), recurring("new", now + 90)]
    assert storage.save_recurring_many(upserted, "upsert") == [False, True]
    replaced = stored(storage, "r0001")
    assert replaced.task == "tasks.other" and replaced.version == 2
    assert storage.save_recurring_many([recurring("new", None, enabled=False)], "update") == [False]
    assert storage.next_recurring_at() == pytest.approx(now + 30, abs=1e-3)


@pytest.mark.parametrize(
    ("mode", "error", "message"),
    [
        ("create", RecordExistsError, "recurring job 'b' already exists"),
        ("update", RecordNotFoundError, "recurring jobs 'a', 'c' do not exist"),
    ],
)
def test_a_refused_chunk_writes_none_of_it(
    storage: Storage, mode: str, error: type[KeyError], message: str
) -> None:
    now = storage.now()
    storage.save_recurring(recurring("b", now + 60, task="tasks.before"), "create")
    chunk = [recurring(rid, now + 1, task="tasks.after") for rid in ("a", "b", "c")]
    with pytest.raises(error, match=message):
        storage.save_recurring_many(chunk, mode)  # type: ignore[arg-type]
    assert storage.count_recurring() == 1
    kept = stored(storage, "b")
    assert (kept.task, kept.version) == ("tasks.before", 1)


def test_save_many_naming_one_id_twice_is_refused_whole(storage: Storage) -> None:
    now = storage.now()
    with pytest.raises(InvalidRecordError, match="'a' appears twice"):
        storage.save_recurring_many([recurring("a", now), recurring("a", now + 1)], "upsert")
    assert storage.count_recurring() == 0


def test_existing_ids_are_read_in_one_call(storage: Storage) -> None:
    now = storage.now()
    stored_ids = [f"e{i:03d}" for i in range(30)]
    storage.save_recurring_many([recurring(rid, now + 60) for rid in stored_ids], "create")
    storage.remove_recurring("e007")
    asked = [*stored_ids[::2], "missing", "e000", "bad id\n", "e007"]
    expected = set(stored_ids[::2])  # e007 (removed) is odd, so not among them
    assert storage.existing_recurring_ids(asked) == expected
    assert storage.existing_recurring_ids([]) == set()
    with pytest.raises(InvalidArgumentError):
        storage.existing_recurring_ids("e000")  # type: ignore[arg-type]
