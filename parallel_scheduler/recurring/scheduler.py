"""RecurringJobScheduler: the delayed scheduler's shape, for cron schedules.

One pass: take ONE distributed lock (its own, so delayed and recurring passes never wait on each
other) -> fetch a BATCH of the recurring jobs with the lowest next-run at or below the storage
clock -> in a BOUNDED THREAD POOL, a chunk per thread (``firing.FIRE_CHUNK``): plan each one's
firings (cron, time zone, misfire policy) and fire the chunk in one storage step, which per
recurring job adds its firing jobs and advances its next run with a compare-and-set on its
version. A pass that fetched a full batch fetches the next at once. Up to ``PLAN_AHEAD``
seconds before the earliest next run, a pass plans that tick's firings without writing them
(``planning_ahead.py``), and the pass at the tick fires them first. A firing is an ordinary
delayed job with a deterministic id (``firing_ids.py``), so a repeated attempt at one tick is a
no-op in storage: every tick fires exactly once, even across crashes and racing schedulers. The
delayed scheduler then releases the firings to the broker, woken after each batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from parallel_scheduler.calendars import Calendar, calendars_of
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.engine.pool import BoundedPool
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import FireOutcome, FireResult, RecurringPassStats
from parallel_scheduler.log_format import pass_event
from parallel_scheduler.queues import QueueRouter
from parallel_scheduler.recurring.firing import (
    FIRE_CHUNK,
    Envelope,
    FiringPush,
    finish_chunk,
    fire_chunk,
)
from parallel_scheduler.recurring.planning_ahead import PLAN_AHEAD, TickPlan, plan_tick
from parallel_scheduler.settings import Settings
from storage_adapters import CalendarStore, Storage, StorageError

__all__ = ["RecurringJobScheduler", "RecurringPassStats"]

#: A chunk as one pool thread fires it: recurring records, or a chunk planned ahead.
_Chunk = TypeVar("_Chunk")

logger = logging.getLogger(__name__)


class RecurringJobScheduler(LockedScheduler[RecurringPassStats]):
    LOCK_NAME = "recurring-scheduler"

    def __init__(
        self,
        storage: Storage,
        settings: Settings | None = None,
        *,
        owner: str | None = None,
        owns_storage: bool = False,
        on_fired: Callable[[], None] | None = None,
        shard: int | None = None,
        serving: Callable[[], bool] | None = None,
        pool: BoundedPool | None = None,
        envelope: Envelope | None = None,
        push: FiringPush | None = None,
        route: QueueRouter | None = None,
        calendars: CalendarStore | None = None,
    ) -> None:
        """``on_fired`` runs after a pass that created firings (to wake the delayed scheduler:
        with shards, the one of the same shard, where a recurring job's firings live).
        ``shard``, ``serving``, ``pool``: for one shard of a sharded store (``LockedScheduler``).
        ``envelope``: builds each firing job's broker message as it is created (the delayed
        path's accept-time messages), so its release builds nothing. ``push``: the delayed
        scheduler of the same store, through which due firings go straight onto the broker's
        lists when storage and broker share a Redis server (``firing.FiringPush``). ``route``:
        the queue of a firing whose call names none (a Celery app's router: ``queues.py``).
        ``calendars``: where the calendars of excluded dates are read once a pass (default
        ``storage``; a shard's scheduler is given the whole sharded store, which keeps them)."""
        super().__init__(
            storage, settings, owner, owns_storage, shard=shard, serving=serving, pool=pool
        )
        self._on_fired = on_fired
        self._envelope = envelope
        self._push = push
        self._route = route
        self._calendar_store: CalendarStore = storage if calendars is None else calendars
        self._ahead: TickPlan | None = None  # the coming tick's firings, planned
        self._planned_for: float | None = None  # the tick last planned (or found nothing)

    def _new_stats(self, lock_acquired: bool) -> RecurringPassStats:
        return RecurringPassStats(lock_acquired=lock_acquired)

    def _made_progress(self, stats: RecurringPassStats) -> bool:
        return stats.fired > 0

    def _pass(self, held: HeldLock, stats: RecurringPassStats) -> None:
        # a chunk for every pool thread: a batch of batch_size alone (1,000 by default) would
        # keep half of the default ten threads idle, since a chunk is FIRE_CHUNK jobs
        settings = self.settings
        batch_size = max(settings.batch_size, FIRE_CHUNK * settings.max_degree_of_parallelism)
        # read once a pass, and only by a pass that has something to fire (filled in below)
        calendars: dict[str, Calendar] = {}
        missing: set[str] = set()
        read_calendars = False
        fire = partial(
            fire_chunk,
            self.storage,
            held,
            self._clock.now,
            self.metrics,
            self._envelope,
            push=self._push,
            route=self._route,
            calendars=calendars,
            missing=missing,
        )
        self._fire_planned(held, stats)
        while self._keep_going(held):
            records = call_storage(lambda: self.storage.fetch_due_recurring(batch_size))
            stats.batches += 1
            stats.fetched += len(records)
            if records and not read_calendars:
                calendars.update(self._calendars())
                read_calendars = True
            chunks = [records[i : i + FIRE_CHUNK] for i in range(0, len(records), FIRE_CHUNK)]
            self._fire_in_pool(fire, chunks, stats)
            if len(records) < batch_size:
                break
        if missing:
            logger.warning(
                "recurring job(s) exclude calendar(s) %s, which do not exist: their ticks fire as "
                "if those calendars were empty (add the calendars, or edit the jobs' exclude)",
                ", ".join(sorted(missing)),
            )
        if stats.fetched:
            logger.info(
                "recurring pass: %d recurring job(s) fired, %d firing(s) created, "
                "%d firing(s) already existed, %d stale recurring job(s), "
                "%d missed occurrence(s), %d recurring job(s) failed, "
                "%d tick(s) held back by overlap, "
                "%d recurring job(s) paused after failures",
                stats.fired,
                stats.created,
                stats.existed,
                stats.stale,
                stats.missed,
                stats.failed,
                stats.skipped,
                stats.paused,
                extra=pass_event(stats.as_dict()),
            )

        if self._keep_going(held):
            self._plan_next(stats)

    def _fire_planned(self, held: HeldLock, stats: RecurringPassStats) -> None:
        """At (or after) the planned tick, fire its planned chunks, one storage step each in
        the pool; what planning at this moment would no longer give is left to the pass."""
        ahead = self._ahead
        now = self._clock.now()
        if ahead is None or now < ahead.tick:
            return
        self._ahead = None
        chunks = ahead.usable_at(now)
        stats.fetched += sum(len(chunk.planned) for chunk in chunks)
        fire = partial(finish_chunk, self.storage, held, self.metrics, push=self._push)
        stats.from_plan += self._fire_in_pool(fire, chunks, stats)

    def _fire_in_pool(
        self,
        fire: Callable[[_Chunk], list[FireResult]],
        chunks: list[_Chunk],
        stats: RecurringPassStats,
    ) -> int:
        """Fire ``chunks`` in the pool, count every outcome into ``stats`` and, when firings were
        created, wake the delayed scheduler (it releases them while the next batch fires);
        returns how many recurring jobs fired."""
        created_before, fired = stats.created, 0
        for results in self._pool.map(fire, chunks):
            for result in results:
                stats.add(result)
                fired += result.outcome is FireOutcome.FIRED
        if stats.created > created_before and self._on_fired is not None:
            self._on_fired()
        return fired

    def _plan_next(self, stats: RecurringPassStats) -> None:
        """When the earliest next run is within ``PLAN_AHEAD`` seconds and not planned yet,
        plan its firings (``planning_ahead.plan_tick``); a storage error leaves it to the tick."""
        try:
            coming = call_storage(self.storage.next_recurring_at)
            now = self._clock.now()
            if (
                coming is None
                or coming == self._planned_for
                or not now < coming <= now + PLAN_AHEAD
            ):
                return
            self._planned_for = coming
            self._ahead = plan_tick(
                self.storage,
                coming,
                self._envelope,
                self._route,
                self._calendars(),
                self._pool,
                self._clock.now,
            )
            stats.planned = sum(len(chunk.planned) for chunk in self._ahead.chunks)
        except StorageError as exc:
            logger.warning(
                "planning the next tick ahead failed (it is planned at the tick): %s", exc
            )

    def _calendars(self) -> dict[str, Calendar]:
        """Every calendar of excluded dates, read once per pass in one storage call (of the
        whole store: with shards, ``storage`` is the sharded store, whose calendars are on shard
        0). A store that cannot read them plans as if there were none, logged, never fatal."""
        try:
            return calendars_of(call_storage(self._calendar_store.list_calendars))
        except StorageError as exc:
            logger.warning("could not read the calendars of excluded dates: %s", exc)
            return {}

    def _next_work_at(self) -> float | None:
        """The earliest enabled recurring job's next run, due or not, in one round trip, so an
        idle loop sleeps until that tick (at most a poll interval), not a poll interval past it,
        or ``PLAN_AHEAD`` seconds before it while it is not planned yet; ``None`` when none has
        a next run."""
        coming = self.storage.next_recurring_at()
        if self._ahead is not None:  # the pass at its tick fires it
            return self._ahead.tick if coming is None else min(coming, self._ahead.tick)
        if coming is None or coming == self._planned_for:
            return coming
        return coming - PLAN_AHEAD  # a pass then, to plan it
