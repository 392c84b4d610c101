"""The client API: schedule, cancel, reschedule, get and list durable delayed jobs; pause and
resume a queue or a task; rate-limit one (``rate_limits.RateLimiting``).

Scheduling writes to storage and nothing else, so it works while no scheduler process runs; the
job waits durably until one does. A job id is an idempotency key: scheduling an id that exists
changes nothing and says so (``ScheduleResult.created`` is False).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from parallel_scheduler.calendars import CalendarKeeping
from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.envelopes import EnvelopeMaker, with_envelopes
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.job_checks import due_time
from parallel_scheduler.jobs import Job, JobSpec, utc_datetime
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.pausing import pauser
from parallel_scheduler.queues import QueueRouter
from parallel_scheduler.ranges import check_page
from parallel_scheduler.rate_limits import RateLimiting
from parallel_scheduler.recurring.jobs import RecurringJobs
from parallel_scheduler.settings import Settings
from parallel_scheduler.unique_jobs import store_jobs
from storage_adapters import JobState, PauseKind, PauseRecord, Storage, list_jobs
from storage_adapters.checks.pauses import check_pause, check_pause_name
from storage_adapters.shard_guard import shards_of, verify_shard_count

__all__ = ["Client", "ScheduleResult"]

T = TypeVar("T")


@dataclass(frozen=True)
class ScheduleResult:
    """What scheduling one job did.

    :ivar job_id: The job's id (the one given, or the one generated).
    :ivar created: ``True`` if the job was stored now; ``False`` if a job with this id existed
        already, in which case nothing was changed.
    :ivar due_at: When the stored job is due (UTC): the requested time for a new job, the stored
        one for an existing id or a held unique key.
    :ivar replaced: For a unique job whose key was held: ``True`` if ``on_conflict="replace"``
        moved the holder (``job_id``, ``created=False``) to this call's time and payload.
    """

    job_id: str
    created: bool
    due_at: datetime
    replaced: bool = False


class Client(RateLimiting, CalendarKeeping):
    """Schedule, cancel, reschedule, read and list durable delayed jobs, manage recurring jobs
    (``client.recurring``), pause queues and tasks (``pause``, ``resume``, ``pauses``) and
    rate-limit them (``limit_queue``, ``limit_task``, ``unlimit_queue``, ``unlimit_task``,
    ``rate_limits``), without a Celery worker or a scheduler process running.

    Every call writes to or reads from storage only; a scheduler process (``parallel-scheduler
    run``, or the Celery plugin in a worker) releases due jobs to the broker. Calls retry while
    storage is unreachable, for at most ``retry_for`` seconds, then raise
    ``StorageUnavailableError``. A client is safe to share between threads; close it (or use
    it as a context manager) to release its connections.

    Example:

    ```python
    from parallel_scheduler import Client

    with Client(storage_url="sqlite:///jobs.db") as client:
        client.setup()
        result = client.schedule("tasks.add", args=(2, 3), countdown=60)
        print(result.job_id, result.created, result.due_at)
        client.cancel(result.job_id)
    ```
    """

    def __init__(
        self,
        storage: Storage | None = None,
        settings: Settings | None = None,
        *,
        retry_for: float = 30.0,
        envelopes: EnvelopeMaker | None = None,
        connect_timeout: float | None = None,
        queue_router: QueueRouter | None = None,
        **overrides: Any,
    ) -> None:
        """Use ``storage`` if given, else open the one ``settings`` (or ``overrides``) name.

        :param storage: An open storage (``storage_adapters.from_url(...)``); the client does not
            close a storage it was given.
        :param settings: The settings to use; default ``Settings.load(overrides)``, which reads
            ``PARALLEL_SCHEDULER_*`` environment variables too.
        :param retry_for: How long a call keeps retrying while storage is unreachable (seconds).
        :param envelopes: A fast-publish dispatcher's envelope maker: builds each job's broker
            message as it is accepted, so releasing it costs no serialisation.
        :param connect_timeout: How long one attempt to reach the server may take (default: the
            ``connect_timeout`` setting).
        :param queue_router: Where a recurring job's trigger or backfill goes when its options
            name no queue (the Celery plugin passes its app's routes): a pause of that queue
            holds it. A job's own ``queue`` option always wins.
        :param overrides: Settings by name, e.g. ``storage_url="redis://127.0.0.1:6379/0"``.

        :raises ConfigurationError: A setting is invalid (named in the message).
        :raises MissingExtraError: The storage URL needs an extra that is not installed.
        :raises InvalidStorageURLError: The storage URL cannot be parsed.
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
        self.recurring.route = queue_router
        self.recurring.outcomes_recorded = self.settings.record_outcomes

    def _call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self.retry_for)

    def setup(self) -> None:
        """Create or upgrade the storage schema; idempotent, safe from several processes.

        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.
        """
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
        jitter: float | timedelta | None = None,
        unique_key: str | None = None,
        on_conflict: Literal["keep", "replace"] = "keep",
        **options: Any,
    ) -> ScheduleResult:
        """Store one job, due at ``eta`` or after ``countdown`` seconds (now when neither).

        :param task: The Celery task name, e.g. ``"proj.tasks.send_email"``.
        :param args: Positional arguments, JSON-serialisable.
        :param kwargs: Keyword arguments, JSON-serialisable.
        :param eta: When the job is due: an aware ``datetime`` or epoch seconds.
        :param countdown: Seconds (or a ``timedelta``) from now until it is due.
        :param job_id: The job's id, an idempotency key: scheduling an id that exists changes
            nothing. Default: a new UUID.
        :param jitter: Seconds (or a ``timedelta``): the due time moves later by an offset in
            ``[0, jitter)`` derived from the id and the due time (the same for a repeated call).
        :param unique_key: At most one scheduled job per ``(task, unique_key)``: if another job
            of the task holds the key, ``on_conflict`` says what happens (the key is freed when
            that job is released, cancelled or expires).
        :param on_conflict: ``"keep"`` the holder (its id comes back, ``created=False``) or
            ``"replace"`` its due time and payload (``replaced=True``).
        :param options: Celery call options the release passes on (``queue``, ``priority``,
            ``expires``, ``headers``, ...).

        :returns: A ``ScheduleResult``: the id, whether it was created, and when it is due.

        :raises InvalidJobError: The job is invalid (both eta and countdown, a non-JSON argument,
            a payload over ``max_payload_bytes``, a bad id); nothing is written.
        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.

        Example:

        ```python
        from parallel_scheduler import Client

        with Client(storage_url="sqlite:///jobs.db") as client:
            client.setup()
            first = client.schedule("tasks.report", countdown=3600, job_id="report-42")
            again = client.schedule("tasks.report", countdown=60, job_id="report-42")
            assert first.created and not again.created  # the first due time stands
        ```
        """
        spec = JobSpec(
            task,
            args=args,
            kwargs=kwargs or {},
            options=options,
            id=job_id,
            eta=eta,
            countdown=countdown,
            jitter=jitter,
            unique_key=unique_key,
            on_conflict=on_conflict,
        )
        return self.schedule_many([spec])[0]

    def schedule_many(self, specs: Iterable[JobSpec]) -> list[ScheduleResult]:
        """Store many jobs in one atomic bulk write: all are validated before any is written.
        Unique jobs (``unique_key`` set) are each stored on their own after that write, each
        atomically (see ``schedule``).

        :param specs: The jobs, as ``JobSpec`` values (``JobSpec(task, args=..., countdown=...)``).

        :returns: One ``ScheduleResult`` per spec, in order.

        :raises InvalidJobError: One spec is invalid, or one id appears twice; nothing is written.
        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.

        Example:

        ```python
        from parallel_scheduler import Client, JobSpec

        with Client(storage_url="sqlite:///jobs.db") as client:
            client.setup()
            specs = [JobSpec("tasks.remind", args=(u,), countdown=86400) for u in range(3)]
            results = client.schedule_many(specs)
            assert all(r.created for r in results)
        ```
        """
        now = self._clock.now()
        limit, shards = self.settings.max_payload_bytes, len(shards_of(self.storage))
        specs = list(specs)
        new_jobs = [spec.encode(now, limit, shards) for spec in specs]
        if len({job.id for job in new_jobs}) != len(new_jobs):
            raise InvalidJobError("the same job id appears twice in one call")
        new_jobs = with_envelopes(new_jobs, self.envelopes)
        self._verify_shards()
        conflicts = [spec.on_conflict for spec in specs]
        added = store_jobs(self.storage, new_jobs, conflicts, self._call)
        # Jobs of one call often share a due time (one countdown): each is shown once.
        shown: dict[float, datetime] = {}
        results = []
        for job, add in zip(new_jobs, added, strict=True):
            if add.created:
                due_at = shown.get(job.due_at)
                if due_at is None:
                    due_at = shown[job.due_at] = utc_datetime(job.due_at)
            else:
                due_at = self._stored_due_at(add.job_id, job.due_at)
            results.append(ScheduleResult(add.job_id, add.created, due_at, add.replaced))
        return results

    def _verify_shards(self) -> None:
        """Refuse, once per client and before its first write, a store recorded with another
        shard count: jobs written there would never run, and a cancel would miss its job."""
        if not self._shards_verified:
            self._call(lambda: verify_shard_count(self.storage))
            self._shards_verified = True

    def _stored_due_at(self, job_id: str, requested: float) -> datetime:
        """The due time storage holds for an existing id or a held key's holder (reporting the
        requested time would tell the caller something untrue)."""
        stored = self._call(lambda: self.storage.get_job(job_id))
        if stored is not None:
            return Job.from_record(stored).due_at
        return utc_datetime(requested)

    def cancel(self, job_id: str) -> bool:
        """Cancel a scheduled job (or one held by a pause).

        :returns: ``True`` if the job was scheduled or held and is now cancelled; ``False`` if it
            is missing or no longer scheduled (already released, cancelled or failed).

        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.
        """
        self._verify_shards()
        return self._call(lambda: self.storage.cancel(job_id))

    def reschedule(
        self,
        job_id: str,
        *,
        eta: datetime | float | None = None,
        countdown: float | timedelta | None = None,
    ) -> bool:
        """Move a scheduled job's due time (a held one stays held), or queue a job set aside as
        failed again (its attempts counted afresh; held if a pause holds it).

        :param job_id: The job to move.
        :param eta: The new due time: an aware ``datetime`` or epoch seconds.
        :param countdown: Seconds (or a ``timedelta``) from now.

        :returns: ``True`` if it moved; ``False`` if it is missing or in another state.

        :raises InvalidJobError: Neither or both of ``eta`` and ``countdown``, or a time out of
            range.
        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.
        """
        if eta is None and countdown is None:
            raise InvalidJobError("reschedule needs eta or countdown")
        due_at = due_time(self._clock.now(), eta=eta, countdown=countdown)
        self._verify_shards()
        return self._call(lambda: self.storage.reschedule(job_id, due_at))

    def pause(self, kind: PauseKind | str, name: str, note: str = "", by: str | None = None) -> int:
        """Stop releasing the jobs of a queue or a task until ``resume``: each scheduled job of
        it is held (its due time kept; every scheduler process obeys) and so is each one that
        would become due while paused. Pausing again replaces the note and ``by``.

        :param kind: ``"queue"`` (the jobs stored with that queue) or ``"task"`` (that task name).
        :param note: Why, for whoever sees the pause (at most 1000 characters).
        :param by: Who paused it (at most 255 characters); default ``user@host`` of this process.
        :returns: How many scheduled jobs it held now.
        :raises InvalidArgumentError: A bad kind, name, note or ``by``; nothing is written.
        """
        checked = check_pause(kind, name, note, pauser(by))
        self._verify_shards()
        return self._call(lambda: self.storage.pause(*checked))

    def resume(self, kind: PauseKind | str, name: str) -> int:
        """End a pause: its held jobs (those no other pause holds) are scheduled again at their
        own due times, so the due ones go out in due order. Returns how many; 0 if not paused."""
        checked = check_pause_name(kind, name)
        self._verify_shards()
        return self._call(lambda: self.storage.resume(*checked))

    def pause_queue(self, name: str, note: str = "", by: str | None = None) -> int:
        """``pause("queue", ...)``: hold the jobs sent to queue ``name``; returns how many."""
        return self.pause(PauseKind.QUEUE, name, note, by)

    def resume_queue(self, name: str) -> int:
        """``resume("queue", name)``: returns how many held jobs are scheduled again."""
        return self.resume(PauseKind.QUEUE, name)

    def pause_task(self, name: str, note: str = "", by: str | None = None) -> int:
        """``pause("task", ...)``: hold the jobs of task ``name``; returns how many."""
        return self.pause(PauseKind.TASK, name, note, by)

    def resume_task(self, name: str) -> int:
        """``resume("task", name)``: returns how many held jobs are scheduled again."""
        return self.resume(PauseKind.TASK, name)

    def pause_recurring(self, recurring_id: str, note: str = "", by: str | None = None) -> bool:
        """``recurring.pause``: stop firing recurring job ``recurring_id`` until
        ``resume_recurring``, keeping ``note`` (why, at most 1000 characters), ``by`` (who, at
        most 255; default ``user@host`` of this process) and since when; whether it changed.

        :raises InvalidArgumentError: A bad note or ``by``; nothing is written.
        :raises InvalidJobError: No recurring job has this id.
        """
        return self.recurring.pause(recurring_id, note, by)

    def resume_recurring(self, recurring_id: str) -> bool:
        """``recurring.resume``: fire again from now on; the pause's note, who and when go."""
        return self.recurring.resume(recurring_id)

    def pauses(self) -> list[PauseRecord]:
        """Every pause in force (kind, name, note, who, since when), by kind and name."""
        return self._call(self.storage.list_pauses)

    def get(self, job_id: str) -> Job | None:
        """One job by id, in any state, or ``None`` if there is none.

        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.
        """
        record = self._call(lambda: self.storage.get_job(job_id))
        return None if record is None else Job.from_record(record)

    def list(
        self, state: JobState | str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[Job]:
        """Jobs of one ``state`` (or all), in due order, ``limit`` at most after skipping
        ``offset``.

        :param state: A ``JobState`` or its value (``"scheduled"``, ``"enqueued"``, ...), or
            ``None`` for every state.
        :param limit: How many jobs at most.
        :param offset: How many to skip first (walked page by page, so large offsets cost reads).

        :raises InvalidJobError: An unknown state, or a limit or offset out of range.
        :raises StorageUnavailableError: Storage stayed unreachable for ``retry_for`` seconds.
        """
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
        """How many jobs are in each state, by state value (every state, zeros included)."""
        return {s.value: n for s, n in self._call(self.storage.count_by_state).items()}

    def close(self) -> None:
        """Close the storage this client opened (a storage passed in is left open)."""
        if self._owns_storage:
            self.storage.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
