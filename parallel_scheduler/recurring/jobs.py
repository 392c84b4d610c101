"""Recurring jobs as callers manage them: create, update, pause, resume, trigger, remove, list.

A firing of recurring job ``R`` at tick ``T`` is an ordinary delayed job with the id
``R@<T in UTC, ISO 8601, seconds>``, e.g. ``nightly-report@2026-11-30T02:00:00Z``, due at ``T``.
Its id is its idempotency key, so a second attempt at the same tick (a retry after a crash, a
racing scheduler) creates nothing: each tick fires exactly once. A manual trigger gets the id
``R@trigger-<UTC time to the microsecond>``. That id form is reserved (``firing_ids``):
``schedule()`` refuses it, so no delayed job can squat a tick.

A manual trigger counts as a run (``recurring_history``): it is recorded in the recent firings
and the last run, never in the next run, so it moves no tick.

Reading a stored recurring job never fails (``stored.py``). ``save_many`` writes thousands at a
time, validated as ``save`` validates one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.errors import InvalidItemError, InvalidJobError, ParallelSchedulerError
from parallel_scheduler.firing_ids import firing_id, trigger_id
from parallel_scheduler.pausing import pauser
from parallel_scheduler.queues import QueueRouter, payload_queue
from parallel_scheduler.ranges import check_page
from parallel_scheduler.recurring import overlap_policy
from parallel_scheduler.recurring.accepting import item_record, new_recurring
from parallel_scheduler.recurring.backfill import Backfill, backfill
from parallel_scheduler.recurring.excluding import with_calendars
from parallel_scheduler.recurring.history import (
    HISTORY_LIMIT,
    add_history,
    later_run,
)
from parallel_scheduler.recurring.limits import limit_reached, runs_of
from parallel_scheduler.recurring.stored import RecurringJob
from parallel_scheduler.recurring.triggers import MisfirePolicy, Schedule, next_tick
from storage_adapters import (
    ManualFiring,
    NewJob,
    NewRecurring,
    RecordExistsError,
    RecordNotFoundError,
    RecurringRecord,
    SaveMode,
    Storage,
)
from storage_adapters.checks.pauses import check_pause_note
from storage_adapters.checks.values import SAVE_MODES
from storage_adapters.shard_guard import verify_shard_count

__all__ = ["HISTORY_LIMIT", "RecurringJob", "RecurringJobs", "add_history", "firing_id"]

T = TypeVar("T")
#: How often a trigger re-reads a recurring job that changed between its read and its write.
TRIGGER_ATTEMPTS = 10
#: Recurring jobs per ``save_many`` round trip: each chunk is one script or transaction, all or
#: nothing, and short enough not to hold a Redis server or a table's rows for long.
SAVE_MANY_CHUNK = 500


class RecurringJobs:
    """The management API, reached as ``Client(...).recurring``.

    A recurring job fires its task on a cron schedule (in an IANA time zone, with the DST rules
    of ``recurring/triggers.py``) or every so many seconds; the scheduler process fires each tick
    once, as the delayed job ``<id>@<tick in UTC>``. Every method that names a job validates it
    before storage is asked; a storage outage is retried for the client's ``retry_for`` seconds,
    then raised as ``StorageUnavailableError``.

    Example::

        client.recurring.save("nightly-report", "reports.build", "30 2 * * *",
                              timezone="Europe/Berlin", args=["eu"], queue="reports")
        client.recurring.pause("nightly-report", note="reports DB migration")
        client.recurring.resume("nightly-report")
        client.recurring.trigger("nightly-report")  # one extra firing now
        client.recurring.remove("nightly-report")
    """

    #: Where a firing made here (a trigger, a backfill) goes when its options name no queue: the
    #: Celery plugin's client sets its app's router (``queues.py``); ``None``: unknown.
    route: QueueRouter | None = None
    #: Whether execution outcomes are recorded (``Settings.record_outcomes``, set by ``Client``):
    #: off, an ``overlap`` other than ``"allow"`` is refused (``overlap_policy.check_recorded``).
    outcomes_recorded: bool = True

    def __init__(
        self, storage: Storage, clock: StorageClock, max_payload_bytes: int, retry_for: float
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._retry_for = retry_for
        self._shards_verified = False

    def _call(self, fn: Callable[[], T]) -> T:
        return call_storage(fn, give_up_after=self._retry_for)

    def save(
        self,
        recurring_id: str,
        task: str,
        cron: str = "",
        *,
        every: float | timedelta | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        timezone: str = "UTC",
        start: datetime | None = None,
        end: datetime | None = None,
        misfire_policy: MisfirePolicy = "run_once",
        misfire_cap: int = 100,
        misfire_grace: float = 60.0,
        jitter: float | timedelta | None = None,
        catch_up_window: float | timedelta | None = None,
        exclude: Sequence[str] = (),
        max_runs: int | None = None,
        overlap: overlap_policy.OverlapPolicy = "allow",
        overlap_timeout: float | timedelta = overlap_policy.DEFAULT_OVERLAP_TIMEOUT,
        pause_after_failures: int | None = None,
        enabled: bool = True,
        mode: SaveMode = "create",
        **options: Any,
    ) -> RecurringJob:
        """Create (``mode="create"``), replace (``"update"``) or either (``"upsert"``).

        The schedule is a ``cron`` expression or an interval (``every``, seconds or timedelta).
        Everything is validated before anything is written; the next run is recomputed from
        the new cron and time zone. Updating an id that does not exist is an error.

        :param recurring_id: the recurring job's id (no ``@``: its firings are ``<id>@<tick>``).
        :param task: the task name each firing is sent as.
        :param cron: 5 fields (minute resolution) or 6 with seconds first; give ``cron`` or
            ``every``.
        :param every: an interval in seconds or a ``timedelta`` (1 s to 100 years), ticking on
            a fixed grid from ``start`` (or the Unix epoch).
        :param args: the positional arguments of each firing (JSON values).
        :param kwargs: the keyword arguments of each firing.
        :param timezone: the IANA zone the cron expression is read in (``"UTC"`` by default).
        :param start: no tick before this aware ``datetime``.
        :param end: no tick after this aware ``datetime``.
        :param misfire_policy: what to fire for ticks missed by more than ``misfire_grace``:
            ``"skip"`` none, ``"run_once"`` (default) the latest, ``"run_all"`` each up to
            ``misfire_cap``.
        :param misfire_cap: the most missed ticks ``"run_all"`` fires (at least 1).
        :param misfire_grace: seconds a tick may be late and still count as on time.
        :param jitter: seconds (or a ``timedelta``) each tick's firing may be moved later by,
            an offset of the id and the tick (the same in every scheduler), never past the next
            tick; 0 or ``None`` (default): none.
        :param catch_up_window: seconds (or a ``timedelta``, 1 s to 100 years): a tick older
            than this when a scheduler sees it never fires, whatever ``misfire_policy`` and
            ``misfire_grace``; ``None`` (default): no window.
        :param exclude: names of calendars of excluded dates (``Client.put_calendar``), each of
            which must exist: a tick on a local date one of them holds does not fire.
        :param max_runs: end the job after this many scheduled firings (a whole number, at
            least 1; triggers and backfills do not count); ``None`` (default): no limit. An
            update keeps the count, so a higher limit resumes a job its limit ended.
        :param overlap: a tick while an earlier firing has not finished: ``"allow"`` (default)
            fires it, ``"skip"`` does not, ``"buffer_one"`` fires it once they have finished
            (one, however many came). Needs execution outcomes (``overlap.py``).
        :param overlap_timeout: seconds (or a ``timedelta``) after its tick at which a firing
            with no final outcome (its worker died) counts as finished; 3600 by default.
        :param pause_after_failures: pause the job after this many failed firings in a row
            (1 to 20; ``failure_pause.py``); ``None`` (default): never. Needs outcomes too.
        :param enabled: ``False`` saves it paused.
        :param mode: ``"create"`` (default), ``"update"`` or ``"upsert"``.
        :param options: send options of each firing (``queue``, ``priority``, ``headers``, ...).
        :returns: the saved recurring job, with its next run.
        :raises InvalidJobError: an invalid id, cron, interval, time zone, date or policy, a
            schedule that never fires again, ``create`` of an id that exists or ``update`` of
            one that does not; nothing is written.
        :raises StorageUnavailableError: storage could not be reached within ``retry_for``.
        """
        record = new_recurring(
            recurring_id,
            task,
            cron,
            every=every,
            args=args,
            kwargs=kwargs,
            timezone=timezone,
            start=start,
            end=end,
            misfire_policy=misfire_policy,
            misfire_cap=misfire_cap,
            misfire_grace=misfire_grace,
            jitter=jitter,
            catch_up_window=catch_up_window,
            exclude=exclude,
            max_runs=max_runs,
            overlap=overlap,
            overlap_timeout=overlap_timeout,
            pause_after_failures=pause_after_failures,
            outcomes_recorded=self.outcomes_recorded,
            enabled=enabled,
            now=self._clock.now(),
            max_payload_bytes=self._max_payload_bytes,
            **options,
        )
        self._verify_shards()
        (record,) = with_calendars([record], lambda: self._call(self._storage.list_calendars))
        if max_runs is not None and mode != "create":
            record = self._ended_if_done(record, max_runs)
        try:
            self._call(lambda: self._storage.save_recurring(record, mode))
        except RecordExistsError:
            raise InvalidJobError(f"recurring job {recurring_id!r} exists already") from None
        except RecordNotFoundError:
            raise InvalidJobError(f"recurring job {recurring_id!r} does not exist") from None
        found = self.get(recurring_id)
        assert found is not None
        return found

    def save_many(
        self, recurring_jobs: Iterable[Mapping[str, Any]], *, mode: SaveMode = "create"
    ) -> list[bool]:
        """Save many recurring jobs, ``SAVE_MANY_CHUNK`` per storage round trip.

        Each item is a mapping of ``save``'s arguments, with the id under ``"id"``
        (``{"id": "nightly", "task": "reports.build", "cron": "0 2 * * *", "queue": "reports"}``).
        Every item is validated as ``save`` validates one before anything is written; then each
        chunk is written all or nothing.

        :param mode: ``"create"`` (default), ``"update"`` or ``"upsert"``, for every item.
        :returns: per item, whether it was created (``False``: it replaced one).
        :raises InvalidItemError: an item is invalid or repeats an id (the message names its
            position and id; ``position`` holds it).
        :raises InvalidJobError: ``mode`` is unknown, or it refuses an id of a chunk
            (``create`` of one that exists, ``update`` of one that does not); nothing of that
            chunk is written, no later chunk is tried, and the message says how many earlier
            items were written.
        :raises StorageUnavailableError: storage could not be reached within ``retry_for``.
        """
        if mode not in SAVE_MODES:
            raise InvalidJobError(f"mode must be one of {', '.join(SAVE_MODES)}, not {mode!r}")
        records = self._records(recurring_jobs)
        self._verify_shards()
        records = with_calendars(records, lambda: self._call(self._storage.list_calendars))
        created: list[bool] = []
        for start in range(0, len(records), SAVE_MANY_CHUNK):
            chunk = records[start : start + SAVE_MANY_CHUNK]
            try:
                created += self._call(partial(self._storage.save_recurring_many, chunk, mode))
            except (RecordExistsError, RecordNotFoundError) as exc:
                written = f"the first {start} were written" if start else "nothing was written"
                raise InvalidJobError(f"{exc.args[0]}: {written}") from None
        return created

    def check_many(self, recurring_jobs: Iterable[Mapping[str, Any]]) -> int:
        """Validate items as ``save_many`` does and write nothing; returns how many there are.

        :raises InvalidItemError: as ``save_many``.
        """
        return len(self._records(recurring_jobs))

    def _records(self, recurring_jobs: Iterable[Mapping[str, Any]]) -> list[NewRecurring]:
        """Every item as stored, validated, ids distinct; next runs from one storage time."""
        now = self._clock.now()
        records: list[NewRecurring] = []
        seen: dict[str, int] = {}
        for position, item in enumerate(recurring_jobs, start=1):
            record = item_record(
                position, item, now, self._max_payload_bytes, self.outcomes_recorded
            )
            if record.id in seen:
                raise InvalidItemError(
                    f"recurring job #{position} ({record.id!r}): the id is also item "
                    f"#{seen[record.id]}; nothing was written",
                    position,
                )
            seen[record.id] = position
            records.append(record)
        return records

    def _verify_shards(self) -> None:
        """Once: a store of another shard count would never fire what is saved in it."""
        if not self._shards_verified:
            self._call(lambda: verify_shard_count(self._storage))
            self._shards_verified = True

    def get(self, recurring_id: str) -> RecurringJob | None:
        """The recurring job with this id, or ``None``; a stored one that no longer validates
        comes back with ``problem`` saying why."""
        record = self._call(lambda: self._storage.get_recurring(recurring_id))
        return None if record is None else RecurringJob.from_record(record)

    def list(self, *, limit: int = 100, offset: int = 0) -> list[RecurringJob]:
        """Up to ``limit`` recurring jobs after the first ``offset``, ordered by id.

        :raises InvalidJobError: ``limit`` or ``offset`` out of range (checked before
            storage is asked).
        """
        check_page(limit, offset)  # before any storage call
        records = self._call(lambda: self._storage.list_recurring(limit, offset))
        return [RecurringJob.from_record(r) for r in records]

    def pause(self, recurring_id: str, note: str = "", by: str | None = None) -> bool:
        """Stop firing until ``resume``, keeping why (``note``, at most 1000 characters) and who
        (``by``, at most 255; default ``user@host`` of this process); returns whether the job was
        changed. Pausing again replaces the note and who; since when stays.

        :raises InvalidArgumentError: a bad note or ``by``; nothing is written.
        :raises InvalidJobError: no recurring job has this id.
        """
        why, who = check_pause_note(note, pauser(by))
        record = self._existing(recurring_id)
        pause = partial(self._storage.set_recurring_enabled, recurring_id, False)
        return call_storage(lambda: pause(record.next_run_at, why, who))

    def resume(self, recurring_id: str) -> bool:
        """Resume from now on: ticks that passed while paused are not fired.

        :returns: whether the job was changed.
        :raises InvalidJobError: no recurring job has this id.
        """
        record = self._existing(recurring_id)
        schedule = Schedule.from_json(record.schedule)
        upcoming = next_tick(schedule, self._clock.now())
        if limit_reached(schedule.max_runs, runs_of(record.history)):
            upcoming = None  # ended by its max_runs: resuming fires nothing more
        return call_storage(
            lambda: self._storage.set_recurring_enabled(recurring_id, True, upcoming)
        )

    def trigger(self, recurring_id: str) -> str:
        """Fire once now, outside the schedule; returns the firing's job id.

        The trigger counts as a run: its job is recorded in the recent firings (marked as a
        trigger) and as the last run, in one write with the job itself. The next run is left as
        it is, so no scheduled tick moves, and none is taken for fired. It does not count
        against ``max_runs`` (only scheduled ticks do, ``limits.py``).

        :returns: the firing's job id, ``<id>@trigger-<UTC time to the microsecond>``.
        :raises InvalidJobError: no recurring job has this id.
        :raises ParallelSchedulerError: the job kept changing under every attempt; nothing was
            triggered.
        """
        for _ in range(TRIGGER_ATTEMPTS):
            job_id = self._try_trigger(recurring_id)
            if job_id is not None:
                return job_id
        raise ParallelSchedulerError(
            f"recurring job {recurring_id!r} changed under each of {TRIGGER_ATTEMPTS} attempts "
            "to trigger it; nothing was triggered"
        )

    def _try_trigger(self, recurring_id: str) -> str | None:
        """One trigger from one read of the row; ``None`` if the row changed in between."""
        record = self._existing(recurring_id)
        now = self._clock.now()
        queue = payload_queue(record.task, record.payload, self.route)
        job = NewJob(trigger_id(recurring_id, now), record.task, record.payload, now, queue=queue)
        firing = ManualFiring(
            last_run_at=later_run(record.last_run_at, now),
            history=add_history(record.history, [(now, job.id)], trigger=True),
            job=job,
        )
        written = self._call(
            lambda: self._storage.trigger_recurring(recurring_id, record.version, firing)
        )
        # None: the row changed since it was read, or an earlier try of this very write went
        # through before its reply was lost (then its job exists).
        if written is None and self._call(lambda: self._storage.get_job(job.id)) is None:
            return None
        return job.id

    def backfill(
        self, recurring_id: str, start: datetime, end: datetime, overlap: str = "allow"
    ) -> Backfill:
        """Fire every tick of a past range once, as the scheduler would have (``backfill.py``).

        :param start: the first instant of the range (an aware ``datetime``), included.
        :param end: the last, included; not after now.
        :returns: how many ticks the range holds, how many jobs were created, and how many
            existed already (a second backfill of the same range creates none). Backfilled
            ticks do not count against ``max_runs``. Ticks on dates the job's calendars
            exclude are not fired (counted in ``excluded``).
        :param overlap: ``"skip"`` fires only the latest tick, none while a firing runs;
            ``"buffer_one"`` fires them one after another, each once the one before finished
            (this call waits for that). ``"allow"`` (default): all at once.
        :raises InvalidJobError: no such recurring job, a naive or reversed range, one that ends
            in the future or holds more than ``BACKFILL_LIMIT`` ticks; nothing is written.
        """
        overlap_policy.check_recorded(overlap, self.outcomes_recorded)
        record = self._existing(recurring_id)
        self._verify_shards()
        now = self._clock.now()
        return backfill(
            self._storage, self._call, record, start, end, now, self.route, overlap,
            self._clock.now, lambda: self._call(self._storage.list_calendars),
        )  # fmt: skip

    def remove(self, recurring_id: str) -> bool:
        """Delete the recurring job (its firings already created stay); returns whether it
        existed."""
        return self._call(lambda: self._storage.remove_recurring(recurring_id))

    def _ended_if_done(self, record: NewRecurring, max_runs: int) -> NewRecurring:
        """``record`` with no next run if the stored job it updates has fired ``max_runs``
        scheduled ticks already (an update keeps the count). Read before the write, so a tick
        fired in between may leave a next run: the firing step then fires nothing and ends it."""
        stored = self._call(lambda: self._storage.get_recurring(record.id))
        if stored is None or not limit_reached(max_runs, runs_of(stored.history)):
            return record
        return replace(record, next_run_at=None)

    def _existing(self, recurring_id: str) -> RecurringRecord:
        record = self._call(lambda: self._storage.get_recurring(recurring_id))
        if record is None:
            raise InvalidJobError(f"recurring job {recurring_id!r} does not exist")
        return record
