"""Unique jobs on Redis (``UniqueJobStore``): the part of ``RedisStorage`` that stores a job only
while no live job of its task holds its ``unique_key``.

Key: ``unique`` (hash: ``<task>\\n<key>`` -> the id of the job that last took the key; a key can
hold no newline, so the field names one pair). A job's hash keeps its ``unique_key``. The field is
read lazily (``lua/add_unique.lua``): it counts only while its job is ``SCHEDULED``, ``HELD`` or
``CLAIMED``, so the scripts that enqueue, cancel, expire or fail a job need not free it; a stale
field is overwritten by the next job with that key, and dropped when its job is purged
(``lua/purge_finished.lua``). A failed unique job rescheduled takes its key back unless another
job holds it (``lua/reschedule.lua``). One script does the check and the write, so racing clients
agree.
"""

from __future__ import annotations

from dataclasses import replace

from storage_adapters.checks.unique import check_unique_job
from storage_adapters.checks.values import check_new_jobs
from storage_adapters.records import NewJob, UniqueAdd, UniqueConflict
from storage_adapters.redis.plumbing import RedisPlumbing, job_fields

__all__ = ["UNIQUE_SCRIPTS", "RedisUniqueJobStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
UNIQUE_SCRIPTS = ("add_unique",)


class RedisUniqueJobStore(RedisPlumbing):
    """Add unique jobs, for ``RedisStorage`` to inherit."""

    def add_unique_job(self, job: NewJob, on_conflict: UniqueConflict) -> UniqueAdd:
        key, conflict = check_unique_job(job, on_conflict)
        check_new_jobs([replace(job, unique_key=None)])  # the rest as add_jobs checks it
        keys = [*self._job_keys(), self._key("unique")]
        args = [self._key("job:"), conflict, *job_fields([job]), key]
        holder, created, replaced = self._run("add_unique", keys, args)
        return UniqueAdd(str(holder), bool(int(created)), bool(int(replaced)))
