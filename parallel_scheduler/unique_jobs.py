"""Storing a client's jobs: plain ones in one ``add_jobs`` batch, unique ones (``unique_key``
set) one ``add_unique_job`` call each, since each needs the answer of what holds its key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from storage_adapters import NewJob, Storage, UniqueAdd, UniqueConflict

__all__ = ["store_jobs"]

T = TypeVar("T")


class StorageCall(Protocol):
    """Runs one storage call, retrying while storage is unreachable (``Client._call``)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...


def store_jobs(
    storage: Storage,
    jobs: Sequence[NewJob],
    conflicts: Sequence[UniqueConflict],
    call: StorageCall,
) -> list[UniqueAdd]:
    """One ``UniqueAdd`` per job, in order (a plain job's: its own id, ``created`` as
    ``add_jobs`` said, never ``replaced``). ``call`` runs each storage call (with retries).

    The plain jobs are written first, all or none; each unique job is then atomic on its own.
    """
    plain = [job for job in jobs if job.unique_key is None]
    created = iter(call(lambda: storage.add_jobs(plain)) if plain else [])
    results = []
    for job, conflict in zip(jobs, conflicts, strict=True):
        if job.unique_key is None:
            results.append(UniqueAdd(job.id, next(created), False))
        else:
            results.append(_add_unique(storage, job, conflict, call))
    return results


def _add_unique(
    storage: Storage,
    job: NewJob,
    conflict: UniqueConflict,
    call: StorageCall,
) -> UniqueAdd:
    """A unique job is stored without a prebuilt envelope: the message names the job's id, and a
    replace moves the payload to the holder, whose id is another (it is serialised at release)."""
    bare = replace(job, envelope=None)
    return call(lambda: storage.add_unique_job(bare, conflict))
