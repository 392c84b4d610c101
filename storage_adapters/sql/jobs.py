"""Accepting and managing delayed jobs in SQL: the ``JobStore`` family of ``SQLStorage``."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from storage_adapters.checks.lookups import names_no_job
from storage_adapters.checks.values import check_new_jobs, epoch_seconds
from storage_adapters.records import JobRecord, JobState, NewJob
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.job_rows import job_record
from storage_adapters.sql.plumbing import ADD_JOBS_PAGE_SIZE, SQLPlumbing
from storage_adapters.sql.unique_statements import held_key_error

__all__ = ["SQLJobStore"]


class SQLJobStore(SQLPlumbing):
    """Accept, read, cancel, reschedule and count jobs, for ``SQLStorage`` to inherit."""

    @rerun_if_ended_idle
    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        check_new_jobs(jobs)
        if not jobs:
            return []
        if len(jobs) == 1:  # a client storing one job per call: one statement on the driver
            (job,) = jobs
            params = {
                "id": job.id,
                "task": job.task,
                "payload": job.payload,
                "due_at": float(job.due_at),
                "envelope": job.envelope,
                "queue": job.queue,
            }
            return [bool(self._driver_rows(self._sql.add_job, params))]
        # One page is one statement, atomic by itself; more pages need a transaction around them.
        scope = self._transaction() if len(jobs) > ADD_JOBS_PAGE_SIZE else self._connection()
        with scope as conn:
            return self._insert_jobs(conn, jobs)

    def get_job(self, job_id: str) -> JobRecord | None:
        if names_no_job(job_id):
            return None
        rows = self._rows(self._sql.get_job, {"job_id": job_id})
        return job_record(rows[0]) if rows else None

    def cancel(self, job_id: str) -> bool:
        if names_no_job(job_id):
            return False
        return self._changed(self._sql.cancel, {"job_id": job_id}) == 1

    def reschedule(self, job_id: str, due_at: float) -> bool:
        params = {"job_id": job_id, "new_due_at": epoch_seconds("due_at", due_at)}
        if names_no_job(job_id):
            return False
        with self._connection() as conn:
            try:
                return int(conn.execute(self._sql.reschedule, params).rowcount) == 1
            except sa.exc.IntegrityError as exc:
                # only a failed unique job made scheduled again can break a rule: its key's
                held = held_key_error(conn, self._sql.unique, job_id)  # holder is another job
                raise (held or self._translate(exc)) from exc

    def count_by_state(self) -> dict[JobState, int]:
        counts = dict.fromkeys(JobState, 0)
        for row in self._rows(self._sql.count_by_state, {}):
            counts[JobState(row.state)] = int(row.jobs)
        return counts
