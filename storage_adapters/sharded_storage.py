"""``ShardedStorage``: S shard stores (see sharding.py) behind the one ``Storage`` contract.

Schedulers work on the shards themselves (``shards``), one lock per shard, so they release in
parallel. Everyone else (the Client, the CLI, the dashboard) keeps calling one ``Storage``: this
class routes what names a job or a recurring job to its shard, and merges what lists or counts
across shards in the contract's own order. Instances, and the locks of the whole store, live in
shard 0.

A lock taken here is taken on every shard, shard 0 first (its token is the lease's token), and
given back on all of them if one is busy: a caller holding it may act on any shard, and each
shard fences it by its own lease. So a scheduler built on this class directly (one active at a
time) is as safe as on one shard, only not parallel.

Pauses are kept by every shard, each its own copy (a shard's scripts read only its own keys, one
Redis slot): ``pause`` and ``resume`` go to every shard, shard 0 first, and ``list_pauses`` merges
the copies, so a pause one shard missed (a call that failed part-way; repeating it completes it)
still shows.

Rate limits are one budget for the whole store, so they live in shard 0 alone, and every
reservation is made there (``sharded/rate_limits.py``); deferred claims are settled on their own
shards.

A unique job (``add_unique_job``) goes to the shard of its ``(task, unique_key)``
(``sharding.unique_shard``), where the key and the job change in one step; its id must fall in
that shard too (``sharding.unique_job_id`` makes one), so that routing by id finds it.

Two things differ from one shard, both documented: an ``add_jobs`` call whose jobs fall in
several shards is all or nothing per shard (a failure part-way leaves the shards already written;
a retry of the same call adds the rest, since accepts are idempotent on id), and a page of
``list_jobs_page`` reads a page from every shard and merges them.

The shard set, the whole-store lock and the release across shards are in ``sharded/``; this class
joins them and adds the families that route to one shard or merge every shard's answer.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence

from storage_adapters.checks.lookups import checked_id_batch
from storage_adapters.checks.outcomes import (
    FINAL_OUTCOMES,
    check_outcome_events,
    check_outcome_ids,
)
from storage_adapters.checks.pauses import check_pause, check_pause_name
from storage_adapters.checks.unique import check_unique_job
from storage_adapters.checks.values import (
    check_new_jobs,
    check_new_recurrings,
    check_planned_firings,
    check_save_mode,
    non_negative_offset,
    positive_count,
)
from storage_adapters.errors import InvalidArgumentError, InvalidRecordError, refused_save
from storage_adapters.paging import job_order
from storage_adapters.records import (
    InstanceRecord,
    JobQuery,
    JobRecord,
    JobState,
    LockLease,
    ManualFiring,
    NewJob,
    NewRecurring,
    OutcomeEvent,
    OutcomeQuery,
    OutcomeState,
    PauseKind,
    PauseRecord,
    PlannedFiring,
    RecurringRecord,
    SaveMode,
    UniqueAdd,
    UniqueConflict,
)
from storage_adapters.sharded.calendars import ShardedCalendarStore
from storage_adapters.sharded.locks import ShardedLockStore
from storage_adapters.sharded.rate_limits import ShardedRateLimitStore
from storage_adapters.sharded.release import ShardedReleaseStore
from storage_adapters.sharded.shard_set import merged
from storage_adapters.sharding import (
    check_shard_count,
    refuse_one_shard_jobs,
    shard_of,
    unique_shard,
)

__all__ = ["ShardedStorage"]


class ShardedStorage(
    ShardedReleaseStore, ShardedLockStore, ShardedRateLimitStore, ShardedCalendarStore
):
    """The ``Storage`` contract over ``shards`` (shard 0 first), each a complete store."""

    def __repr__(self) -> str:
        return f"ShardedStorage({self.home!r}, shards={len(self.shards)})"

    # -- StorageAdmin -------------------------------------------------------------------------

    def setup(self) -> None:
        """Set up every shard, shard 0 last: it records (or checks) the shard count, and only
        once every shard's schema exists, so a half set-up store is never taken as ready.
        A count already recorded otherwise is refused first, before any shard is created."""
        stored = self.home.stored_shard_count()  # type: ignore[attr-defined]
        prefix = getattr(self.home, "_prefix", "?")
        if stored is not None and stored != len(self.shards):
            check_shard_count(self.home, len(self.shards), prefix)
        if stored is None and self.home.exists():  # type: ignore[attr-defined]
            refuse_one_shard_jobs(self.home, len(self.shards), prefix)
        for shard in self.shards[1:]:
            shard.setup()
        self.home.expected_shards = len(self.shards)  # type: ignore[attr-defined]
        self.home.setup()

    def close(self) -> None:
        for shard in reversed(self.shards):  # shard 0 owns the connections: closed last
            shard.close()

    def drop(self) -> None:
        for shard in reversed(self.shards):
            shard.drop()

    # -- JobStore -----------------------------------------------------------------------------

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        check_new_jobs(jobs)  # every job checked before any shard writes
        created = [False] * len(jobs)
        for shard, positions in sorted(self._by_shard(job.id for job in jobs).items()):
            results = self.shards[shard].add_jobs([jobs[p] for p in positions])
            for position, result in zip(positions, results, strict=True):
                created[position] = result
        return created

    def get_job(self, job_id: str) -> JobRecord | None:
        return self._shard_for(job_id).get_job(job_id)

    def add_unique_job(self, job: NewJob, on_conflict: UniqueConflict) -> UniqueAdd:
        """To the key's shard (its key and job change in one step there), which must be the
        job id's shard too, or get_job and cancel would look for the job elsewhere."""
        key, conflict = check_unique_job(job, on_conflict)
        count = len(self.shards)
        shard = unique_shard(job.task, key, count)
        if shard_of(job.id, count) != shard:
            raise InvalidRecordError(
                f"unique job id {job.id!r} does not fall in the shard of its unique_key {key!r}: "
                "with shards, a unique job's id must come from sharding.unique_job_id"
            )
        return self.shards[shard].add_unique_job(job, conflict)

    def cancel(self, job_id: str) -> bool:
        return self._shard_for(job_id).cancel(job_id)

    def reschedule(self, job_id: str, due_at: float) -> bool:
        return self._shard_for(job_id).reschedule(job_id, due_at)

    def count_by_state(self) -> dict[JobState, int]:
        totals = dict.fromkeys(JobState, 0)
        for shard in self.shards:
            for state, count in shard.count_by_state().items():
                totals[state] += count
        return totals

    # -- RecurringStore: a recurring job and its firings live in one shard ----------------------

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        return self._shard_for(recurring.id).save_recurring(recurring, mode)

    def save_recurring_many(self, recurrings: Sequence[NewRecurring], mode: SaveMode) -> list[bool]:
        """Each shard's part in one step of that shard. ``create`` and ``update`` first ask each
        shard which of its ids exist (one read per shard), so a refusal is raised before any
        shard writes; ``upsert``, which no id refuses, goes straight to the shards."""
        check_save_mode(mode)
        check_new_recurrings(recurrings)  # every one checked before any shard writes
        if mode != "upsert":
            existing = self.existing_recurring_ids([r.id for r in recurrings])
            refused = [r.id for r in recurrings if (r.id in existing) == (mode == "create")]
            if refused:
                raise refused_save(mode, refused)
        created = [False] * len(recurrings)
        for shard, positions in sorted(self._by_shard(r.id for r in recurrings).items()):
            part = [recurrings[p] for p in positions]
            results = self.shards[shard].save_recurring_many(part, mode)
            for position, result in zip(positions, results, strict=True):
                created[position] = result
        return created

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        return self._shard_for(recurring_id).get_recurring(recurring_id)

    def existing_recurring_ids(self, recurring_ids: Sequence[str]) -> set[str]:
        ids = checked_id_batch(recurring_ids)
        found: set[str] = set()
        for shard, positions in sorted(self._by_shard(ids).items()):
            found |= self.shards[shard].existing_recurring_ids([ids[p] for p in positions])
        return found

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        positive_count("limit", limit)
        non_negative_offset(offset)
        parts = [shard.list_recurring(offset + limit, 0) for shard in self.shards]
        return merged(parts, lambda record: record.id, offset + limit)[offset:]

    def remove_recurring(self, recurring_id: str) -> bool:
        return self._shard_for(recurring_id).remove_recurring(recurring_id)

    def set_recurring_enabled(
        self,
        recurring_id: str,
        enabled: bool,
        next_run_at: float | None,
        note: str = "",
        paused_by: str = "",
        version: int | None = None,
    ) -> bool:
        return self._shard_for(recurring_id).set_recurring_enabled(
            recurring_id, enabled, next_run_at, note, paused_by, version
        )

    def fetch_due_recurring(
        self, limit: int, until: float | None = None, offset: int = 0
    ) -> list[RecurringRecord]:
        # each shard's first offset + limit, merged, then the page: one order over the shards
        wanted = positive_count("limit", limit) + non_negative_offset(offset)
        parts = [shard.fetch_due_recurring(wanted, until) for shard in self.shards]
        return merged(parts, lambda record: (record.next_run_at, record.id), wanted)[offset:]

    def next_recurring_at(self) -> float | None:
        times = [t for shard in self.shards if (t := shard.next_recurring_at()) is not None]
        return min(times, default=None)

    def fire_recurring_many(
        self, lock: LockLease, planned: Sequence[PlannedFiring]
    ) -> list[list[bool] | None]:
        """Each shard's part in one step of that shard, under that shard's lease (a recurring
        scheduler of one shard fires only that shard's recurring jobs, so there is one part)."""
        check_planned_firings(planned)
        count = len(self.shards)
        for item in planned:
            shard = shard_of(item.recurring_id, count)
            strays = [job.id for job in item.firing.jobs if shard_of(job.id, count) != shard]
            if strays:
                raise InvalidArgumentError(
                    f"firing job id(s) {strays[:3]!r} do not fall in recurring job "
                    f"{item.recurring_id!r}'s shard: a firing's id must be "
                    "'<recurring id>@<UTC time>Z' (see firing_ids.py)"
                )
        results: list[list[bool] | None] = [None] * len(planned)
        for shard, positions in sorted(self._by_shard(p.recurring_id for p in planned).items()):
            held = self._lease_on(lock, shard)
            if held is None:
                continue
            part = self.shards[shard].fire_recurring_many(held, [planned[p] for p in positions])
            for position, result in zip(positions, part, strict=True):
                results[position] = result
        return results

    def trigger_recurring(
        self, recurring_id: str, version: int, firing: ManualFiring
    ) -> bool | None:
        shard = shard_of(recurring_id, len(self.shards))
        if shard_of(firing.job.id, len(self.shards)) != shard:
            raise InvalidArgumentError(
                f"trigger job id {firing.job.id!r} does not fall in recurring job "
                f"{recurring_id!r}'s shard: a trigger's id must be '<recurring id>@trigger-...' "
                "(parallel_scheduler/firing_ids.py)"
            )
        return self.shards[shard].trigger_recurring(recurring_id, version, firing)

    def count_recurring(self) -> int:
        return sum(shard.count_recurring() for shard in self.shards)

    # -- InstanceStore: the whole store's, in shard 0 -----------------------------------------

    def register_instance(self, instance: InstanceRecord) -> None:
        self.home.register_instance(instance)

    def heartbeat_instance(self, instance_id: str, details: str) -> bool:
        return self.home.heartbeat_instance(instance_id, details)

    def list_instances(self) -> list[InstanceRecord]:
        return self.home.list_instances()

    def remove_instances_older_than(self, cutoff: float, limit: int = 1000) -> int:
        return self.home.remove_instances_older_than(cutoff, limit)

    def remove_instance(self, instance_id: str) -> bool:
        return self.home.remove_instance(instance_id)

    # -- RetentionStore and BrowseStore ---------------------------------------------------------

    def purge_finished(
        self, states: Iterable[JobState | str], older_than: float, limit: int
    ) -> int:
        states = list(states)
        positive_count("limit", limit)
        purged = 0
        for shard in self.shards:
            if purged >= limit:
                break
            purged += shard.purge_finished(states, older_than, limit - purged)
        return purged

    def list_jobs_page(self, query: JobQuery, limit: int) -> list[JobRecord]:
        parts = [shard.list_jobs_page(query, limit) for shard in self.shards]
        return merged(parts, job_order, limit)

    def finished_counts(
        self, state: JobState, since: float, bucket: float
    ) -> list[tuple[float, int]]:
        totals: dict[float, int] = {}
        for shard in self.shards:
            for start, count in shard.finished_counts(state, since, bucket):
                totals[start] = totals.get(start, 0) + count
        return sorted(totals.items())

    # -- OutcomeStore: a job's outcomes live in its shard ---------------------------------------

    def record_outcomes(self, events: Sequence[OutcomeEvent]) -> int:
        checked = check_outcome_events(events)  # the whole batch checked before any shard writes
        groups = self._by_shard(event.job_id for event in checked)
        return sum(
            self.shards[shard].record_outcomes([checked[p] for p in positions])
            for shard, positions in sorted(groups.items())
        )

    def outcome_history(self, job_id: str) -> list[OutcomeEvent]:
        return self._shard_for(job_id).outcome_history(job_id)

    def latest_outcomes(self, job_ids: Sequence[str]) -> dict[str, OutcomeEvent]:
        ids = check_outcome_ids(job_ids)
        found: dict[str, OutcomeEvent] = {}
        for shard, positions in sorted(self._by_shard(ids).items()):
            found.update(self.shards[shard].latest_outcomes([ids[p] for p in positions]))
        return {job_id: found[job_id] for job_id in ids if job_id in found}

    def outcomes_page(self, query: OutcomeQuery, limit: int) -> list[OutcomeEvent]:
        parts = [shard.outcomes_page(query, limit) for shard in self.shards]
        newest = heapq.merge(*parts, key=lambda event: (event.at, event.job_id), reverse=True)
        return list(itertools.islice(newest, limit))

    def outcome_counts(self) -> dict[str, dict[OutcomeState, int]]:
        totals: dict[str, dict[OutcomeState, int]] = {}
        for shard in self.shards:
            for task, counts in shard.outcome_counts().items():
                per_task = totals.setdefault(task, dict.fromkeys(FINAL_OUTCOMES, 0))
                for state, count in counts.items():
                    per_task[state] += count
        return dict(sorted(totals.items()))

    # -- PauseStore: every shard keeps its own copy of the pauses -------------------------------

    def pause(self, kind: PauseKind, name: str, note: str, paused_by: str) -> int:
        checked = check_pause(kind, name, note, paused_by)  # refused before any shard writes
        return sum(shard.pause(*checked) for shard in self.shards)

    def resume(self, kind: PauseKind, name: str) -> int:
        checked = check_pause_name(kind, name)
        return sum(shard.resume(*checked) for shard in self.shards)

    def list_pauses(self) -> list[PauseRecord]:
        """Every shard's pauses, one record per pause: shard 0's, or the first shard's that has
        it (they differ only in ``paused_at``, each shard stamping its own)."""
        found: dict[tuple[str, str], PauseRecord] = {}
        for shard in self.shards:
            for pause in shard.list_pauses():
                found.setdefault((pause.kind.value, pause.name), pause)
        return [found[key] for key in sorted(found)]
