"""What every adapter checks before storing a unique job (``UniqueJobStore`` in
``contract/unique.py``): one home for the key's bounds and the refusals."""

from __future__ import annotations

from dataclasses import replace

from storage_adapters.checks.values import check_new_jobs
from storage_adapters.errors import InvalidArgumentError, InvalidRecordError
from storage_adapters.records import NewJob, UniqueConflict

__all__ = [
    "MAX_UNIQUE_KEY_LENGTH",
    "UNIQUE_CONFLICTS",
    "check_unique_job",
    "check_unique_key",
    "check_unique_new_job",
]

#: The longest unique key kept (beside a task name of at most 255).
MAX_UNIQUE_KEY_LENGTH = 255
#: What a second job with a held key does: keep the holder, or replace its time and payload.
UNIQUE_CONFLICTS: tuple[UniqueConflict, ...] = ("keep", "replace")


def check_unique_key(key: object) -> str:
    """A unique key: 1-255 printable characters without leading or trailing spaces."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_UNIQUE_KEY_LENGTH:
        raise InvalidRecordError(
            f"unique_key must be a string of 1-{MAX_UNIQUE_KEY_LENGTH} characters, not {key!r}"
        )
    if key != key.strip() or not key.isprintable():
        raise InvalidRecordError(
            f"unique_key {key!r} must be printable, without leading or trailing spaces"
        )
    return key


def check_unique_job(job: NewJob, on_conflict: object) -> tuple[str, UniqueConflict]:
    """The key of a job for ``add_unique_job`` and the conflict rule, checked (the rest of the
    job is checked as ``add_jobs`` checks it, by the adapter)."""
    if on_conflict not in UNIQUE_CONFLICTS:
        raise InvalidArgumentError(f"on_conflict must be 'keep' or 'replace', not {on_conflict!r}")
    if not isinstance(job, NewJob) or job.unique_key is None:
        raise InvalidRecordError("add_unique_job takes a NewJob whose unique_key is set")
    return check_unique_key(job.unique_key), on_conflict


def check_unique_new_job(job: NewJob, on_conflict: object) -> tuple[str, UniqueConflict]:
    """``check_unique_job``, then the rest of the job as ``add_jobs`` checks it (its id, task,
    payload, envelope, queue and due time): everything ``add_unique_job`` is given, checked."""
    checked = check_unique_job(job, on_conflict)
    check_new_jobs([replace(job, unique_key=None)])  # add_jobs refuses a key: the rest only
    return checked
