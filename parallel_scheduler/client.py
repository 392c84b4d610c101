"""The client API: schedule, cancel, reschedule, get and list durable delayed jobs.

Scheduling writes to storage and nothing else, so it works while no scheduler process runs; the
job waits durably until one does. A job id is an idempotency key: scheduling an id that exists
changes nothing and says so (``ScheduleResult.created`` is False).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.envelopes import EnvelopeMaker, with_envelopes
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.job_checks import due_time
from parallel_scheduler.jobs import Job, JobSpec, utc_datetime
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.ranges import check_page
from parallel_scheduler.recurring.jobs import RecurringJobs
from parallel_scheduler.settings import Settings
from storage_adapters import JobState, NewJob, Storage, list_jobs
from storage_adapters.shard_guard import verify_shard_count

__all__ = ["Client", "ScheduleResult"]

T = TypeVar("T")


@dataclass(frozen=True)
class ScheduleResult:
    job_id: str
    created: bool
    due_at: datetime


class Client:
    def __init__(
        self,
        storage: Storage | None = None,
        settings: Settings | None = None,
        *,
        retry_for: float = 30.0,
        envelopes: EnvelopeMaker | None = None,
        connect_timeout: float | None = None,
        **overrides: Any,
    ) -> None:
        """Use ``storage`` if given, else open the one ``settings`` (or ``overrides``) name.

        ``retry_for`` bounds how long a call keeps retrying while storage is unreachable, and
        ``connect_timeout`` (default: the ``connect_timeout`` setting) how long one attempt to
        reach the server may take.
        ``envelopes`` (a fast-publish dispatcher) builds each job's broker message as it is
        accepted, so releasing it costs no serialisation.
        """
        self.retry_for = retry_for
        self.envelopes = envelopes
        self.settings = settings or Settings.load(overrides)
        self._owns_storage = storage is None
        self.storage = storage or open_storage(
            self.settings,
            pool_size=self.settings.max_degree_of_parallelism,
            connect_timeout=connect_timeout,
        )
        self._shards_verified = False
        self._clock = StorageClock(self.storage)
        self.recurring = RecurringJobs(
            self.storage, self._clock, self.settings.max_payload_bytes, retry_for
        )

    def _call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self.retry_for)

    def setup(self) -> None:
        self._call(self.storage.setup)

    def schedule(
        self,
        task: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        eta: datetime | float | None = None,
        countdown: float | timedelta | None = None,
        job_id: str | None = None,
        **options: Any,
    ) -> ScheduleResult:
        """Store one job, due at ``eta`` or after ``countdown`` seconds (now when neither)."""
        spec = JobSpec(
            task,
            args=args,
            kwargs=kwargs or {},
            options=options,
            id=job_id,
            eta=eta,
            countdown=countdown,
        )
        return self.schedule_many([spec])[0]

    def schedule_many(self, specs: Iterable[JobSpec]) -> list[ScheduleResult]:
        """Store many jobs in one atomic bulk write: all are validated before any is written."""
        now = self._clock.now()
        limit = self.settings.max_payload_bytes
        new_jobs = [spec.encode(now, limit) for spec in specs]
        if len({job.id for job in new_jobs}) != len(new_jobs):
            raise InvalidJobError("the same job id appears twice in one call")
        new_jobs = with_envelopes(new_jobs, self.envelopes)
        self._verify_shards()
        created = self._call(lambda: self.storage.add_jobs(new_jobs))
        # Jobs of one call often share a due time (one countdown): each is shown once.
        shown: dict[float, datetime] = {}
        results = []
        for job, was_created in zip(new_jobs, created, strict=True):
            if was_created:
                due_at = shown.get(job.due_at)
                if due_at is None:
                    due_at = shown[job.due_at] = utc_datetime(job.due_at)
            else:
                due_at = self._stored_due_at(job, was_created)
            results.append(ScheduleResult(job.id, was_created, due_at))
        return results

    def _verify_shards(self) -> None:
        """Refuse, once per client and before its first write, a store recorded with another
        shard count: jobs written there would never run, and a cancel would miss its job."""
        if not self._shards_verified:
            self._call(lambda: verify_shard_count(self.storage))
            self._shards_verified = True

    def _stored_due_at(self, job: NewJob, was_created: bool) -> datetime:
        """The due time storage holds: the requested one for a new job, the stored one when the
        id existed (scheduling an existing id changes nothing, so reporting the requested time
        would tell the caller something untrue)."""
        if not was_created:
            stored = self._call(lambda: self.storage.get_job(job.id))
            if stored is not None:
                return Job.from_record(stored).due_at
        return utc_datetime(job.due_at)

    def cancel(self, job_id: str) -> bool:
        """True if the job was scheduled and is now cancelled."""
        self._verify_shards()
        return self._call(lambda: self.storage.cancel(job_id))

    def reschedule(
        self,
        job_id: str,
        *,
        eta: datetime | float | None = None,
        countdown: float | timedelta | None = None,
    ) -> bool:
        """Move a scheduled job's due time, or queue a job set aside as failed again (its
        attempts counted afresh); False if it is missing or in another state."""
        if eta is None and countdown is None:
            raise InvalidJobError("reschedule needs eta or countdown")
        due_at = due_time(self._clock.now(), eta=eta, countdown=countdown)
        self._verify_shards()
        return self._call(lambda: self.storage.reschedule(job_id, due_at))

    def get(self, job_id: str) -> Job | None:
        record = self._call(lambda: self.storage.get_job(job_id))
        return None if record is None else Job.from_record(record)

    def list(
        self, state: JobState | str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[Job]:
        if isinstance(state, str):
            try:
                state = JobState(state)
            except ValueError:
                known = ", ".join(s.value for s in JobState)
                raise InvalidJobError(f"unknown state {state!r}; known: {known}") from None
        check_page(limit, offset)
        records = self._call(lambda: list_jobs(self.storage, state, limit, offset))
        return [Job.from_record(r) for r in records]

    def counts(self) -> dict[str, int]:
        return {s.value: n for s, n in self._call(self.storage.count_by_state).items()}

    def close(self) -> None:
        if self._owns_storage:
            self.storage.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
