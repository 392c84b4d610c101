"""Due jobs, the scheduler lock and one firing, as the storage tests set them up directly."""

from __future__ import annotations

from storage_adapters import Firing, LockLease, NewJob, PlannedFiring, Storage

LOCK = "delayed-scheduler"


def add_due(storage: Storage, count: int, prefix: str = "j") -> list[str]:
    """``count`` jobs already due, with distinct due times so their order is known."""
    now = storage.now()
    ids = [f"{prefix}{i:05d}" for i in range(count)]
    storage.add_jobs([NewJob(i, "tasks.t", "{}", now - 100 + n * 0.001) for n, i in enumerate(ids)])
    return ids


def take_lock(storage: Storage, owner: str = "scheduler-a", lease: float = 30) -> LockLease:
    """The delayed scheduler's lock, which must be free."""
    lock = storage.acquire_lock(LOCK, owner, lease)
    assert lock is not None
    return lock


def fire_one(
    storage: Storage, recurring_id: str, version: int, lock: LockLease, firing: Firing
) -> list[bool] | None:
    """One recurring job fired through ``fire_recurring_many``, as a chunk of one."""
    (result,) = storage.fire_recurring_many(lock, [PlannedFiring(recurring_id, version, firing)])
    return result
