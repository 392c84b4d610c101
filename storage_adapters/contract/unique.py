"""The unique-jobs family (``UniqueJobStore``): at most one job per ``(task, unique_key)`` waiting
to be released, kept by storage so that racing clients and scheduler processes agree."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from storage_adapters.records import NewJob, UniqueAdd, UniqueConflict

__all__ = ["UniqueJobStore"]


@runtime_checkable
class UniqueJobStore(Protocol):
    """Unique jobs: a job whose ``unique_key`` is set holds that key for its task while it is
    ``SCHEDULED``, ``HELD`` or ``CLAIMED``; once it is enqueued, cancelled, expired, failed or
    purged the key is free again. ``add_jobs`` refuses such jobs: they go through here, one at a
    time, because each needs the answer of what holds its key."""

    def add_unique_job(self, job: NewJob, on_conflict: UniqueConflict) -> UniqueAdd:
        """Store ``job`` (its ``unique_key`` set) unless a job with its id exists in any state
        (then nothing changes: ``UniqueAdd(job.id, created=False, replaced=False)``, as
        ``add_jobs``'s idempotent accept) or another job of ``job.task`` holds its key.

        On a held key, ``"keep"`` changes nothing and answers the holder's id with
        ``created=False``; ``"replace"`` moves a ``SCHEDULED`` or ``HELD`` holder to
        ``job.due_at`` with ``job``'s payload, envelope and queue (held or scheduled again as
        the pauses in force say), keeping the holder's id and attempts (``replaced=True``),
        and leaves a ``CLAIMED`` holder alone (it is being sent: ``replaced=False``). ``job``
        itself is never stored then. Atomic: of clients racing with one key, exactly one
        creates the job and every other answer names it.

        With shards, the job must live in its key's shard: its id is made by
        ``sharding.unique_job_id`` (``InvalidRecordError`` otherwise). Checks as ``add_jobs``,
        plus ``checks/unique.py`` for the key and ``on_conflict``; bad input writes nothing.
        """
