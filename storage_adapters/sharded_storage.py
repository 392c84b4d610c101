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

Two things differ from one shard, both documented: an ``add_jobs`` call whose jobs fall in
several shards is all or nothing per shard (a failure part-way leaves the shards already written;
a retry of the same call adds the rest, since accepts are idempotent on id), and
``list_jobs``'s ``offset`` reads ``offset + limit`` jobs from every shard (browsing pages by
keyset instead, at the cost of a page per shard).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from storage_adapters.base import Storage
from storage_adapters.checks.values import (
    check_new_jobs,
    error_text,
    non_negative_offset,
    positive_count,
    positive_seconds,
)
from storage_adapters.errors import InvalidArgumentError
from storage_adapters.records import (
    ClaimedJob,
    Firing,
    InstanceRecord,
    JobQuery,
    JobRecord,
    JobState,
    LockLease,
    ManualFiring,
    NewJob,
    NewRecurring,
    RecurringRecord,
    SaveMode,
)
from storage_adapters.sharding import (
    check_shard_count,
    check_shards,
    refuse_one_shard_jobs,
    shard_of,
)

__all__ = ["ShardedStorage"]

T = TypeVar("T")
_SCHEDULED = JobState.SCHEDULED
MAX_PAGE = 1000  # the most ``list_jobs_page`` returns at once


def _merged(parts: Iterable[Iterable[T]], key: Callable[[T], Any], limit: int) -> list[T]:
    """The first ``limit`` items of sorted ``parts``, merged in ``key`` order."""
    return list(itertools.islice(heapq.merge(*parts, key=key), limit))


def _job_order(job: JobRecord) -> tuple[float, str]:
    return (job.due_at, job.id)


class ShardedStorage:
    """The ``Storage`` contract over ``shards`` (shard 0 first), each a complete store."""

    def __init__(self, shards: Sequence[Storage]) -> None:
        check_shards(len(shards))
        self.shards: tuple[Storage, ...] = tuple(shards)
        self.home = self.shards[0]
        # held whole-store locks: (name, token) -> the lease on each shard, shard 0 first
        self._leases: dict[tuple[str, int], list[LockLease]] = {}
        self._leases_guard = threading.Lock()

    def __repr__(self) -> str:
        return f"ShardedStorage({self.home!r}, shards={len(self.shards)})"

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    def _shard_for(self, job_id: str) -> Storage:
        return self.shards[shard_of(job_id, len(self.shards))]

    def _by_shard(self, ids: Iterable[str]) -> dict[int, list[int]]:
        """Positions of ``ids`` grouped by shard, in input order within each."""
        groups: dict[int, list[int]] = defaultdict(list)
        for position, job_id in enumerate(ids):
            groups[shard_of(job_id, len(self.shards))].append(position)
        return groups

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

    def now(self) -> float:
        return self.home.now()

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

    def list_jobs(self, state: JobState | None, limit: int, offset: int = 0) -> list[JobRecord]:
        positive_count("limit", limit)
        non_negative_offset(offset)
        parts = [shard.list_jobs(state, offset + limit, 0) for shard in self.shards]
        return _merged(parts, _job_order, offset + limit)[offset:]

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

    # -- ReleaseStore ---------------------------------------------------------------------------

    def _lease_on(self, lock: LockLease, shard: int) -> LockLease | None:
        with self._leases_guard:
            leases = self._leases.get((lock.name, lock.token))
        return None if leases is None else leases[shard]

    def _due_heads(self, limit: int) -> list[tuple[float, str, int]]:
        """The ``limit`` earliest due scheduled jobs over every shard: (due_at, id, shard)."""
        query = JobQuery(state=_SCHEDULED, due_to=self.now())
        parts = [list(self._shard_heads(k, query, limit)) for k in range(len(self.shards))]
        return _merged(parts, lambda head: head[:2], limit)

    def _shard_heads(
        self, shard: int, query: JobQuery, limit: int
    ) -> Iterator[tuple[float, str, int]]:
        """Up to ``limit`` of one shard's due jobs, earliest first, a keyset page at a time."""
        taken = 0
        while taken < limit:
            page = self.shards[shard].list_jobs_page(query, min(limit - taken, MAX_PAGE))
            yield from ((job.due_at, job.id, shard) for job in page)
            taken += len(page)
            if len(page) < min(limit - taken + len(page), MAX_PAGE):
                return
            query = JobQuery(state=_SCHEDULED, due_to=query.due_to, after=_job_order(page[-1]))

    def fetch_due_ids(self, limit: int) -> list[str]:
        positive_count("limit", limit)
        return [job_id for _, job_id, _ in self._due_heads(limit)]

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        shard = shard_of(job_id, len(self.shards))
        held = self._lease_on(lock, shard)
        if held is None:
            return None
        return self.shards[shard].claim(job_id, held, lease)

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        """The ``limit`` earliest due jobs over every shard: counted per shard from the due
        heads, then claimed by each shard's own set-based step, earliest first overall."""
        positive_count("limit", limit)
        wanted: dict[int, int] = defaultdict(int)
        for _, _, shard in self._due_heads(limit):
            wanted[shard] += 1
        claimed: list[ClaimedJob] = []
        for shard, count in wanted.items():
            held = self._lease_on(lock, shard)
            if held is None:
                return []
            claimed.extend(self.shards[shard].claim_due(count, held, lease))
        return sorted(claimed, key=lambda job: (job.due_at, job.id))

    def _each_shard_of(
        self, claims: Sequence[ClaimedJob], act: Callable[[Storage, list[ClaimedJob]], list[str]]
    ) -> list[str]:
        done: list[str] = []
        for shard, positions in sorted(self._by_shard(claim.id for claim in claims).items()):
            done.extend(act(self.shards[shard], [claims[p] for p in positions]))
        return done

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        return self._each_shard_of(claims, lambda shard, part: shard.mark_enqueued(part))

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        return self._each_shard_of(claims, lambda shard, part: shard.unclaim(part, error))

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        return self._each_shard_of(claims, lambda shard, part: shard.expire(part, reason))

    def back_off(self, claims: Sequence[ClaimedJob], error: str, delay: float) -> list[str]:
        error, delay = error_text(error), positive_seconds("delay", delay)
        return self._each_shard_of(claims, lambda shard, part: shard.back_off(part, error, delay))

    def fail(self, claims: Sequence[ClaimedJob], error: str) -> list[str]:
        error = error_text(error)
        return self._each_shard_of(claims, lambda shard, part: shard.fail(part, error))

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        positive_count("limit", limit)
        recovered = 0
        for shard in self.shards:
            if recovered >= limit:
                break
            recovered += shard.recover_expired_claims(limit - recovered)
        return recovered

    def next_due_at(self) -> float | None:
        return min(_known(shard.next_due_at() for shard in self.shards), default=None)

    def next_work_at(self) -> float | None:
        return min(_known(shard.next_work_at() for shard in self.shards), default=None)

    # -- LockStore: a whole-store lock is every shard's lock ------------------------------------

    def acquire_lock(self, name: str, owner: str, lease: float) -> LockLease | None:
        taken: list[LockLease] = []
        try:
            for shard in self.shards:
                held = shard.acquire_lock(name, owner, lease)
                if held is None:
                    break
                taken.append(held)
        except BaseException:
            self._give_back(taken)
            raise
        if len(taken) < len(self.shards):
            self._give_back(taken)
            return None
        first = taken[0]
        with self._leases_guard:
            self._leases[(first.name, first.token)] = taken
        return first

    def _give_back(self, leases: Iterable[LockLease]) -> None:
        """Release ``leases``, taken on the shards in order (shard 0 first)."""
        for shard, held in zip(self.shards, leases, strict=False):
            shard.release_lock(held)

    def renew_lock(self, lock: LockLease, lease: float) -> LockLease | None:
        key = (lock.name, lock.token)
        with self._leases_guard:
            leases = self._leases.get(key)
        if leases is None:  # not taken here (or given back): no longer this caller's
            return None
        renewed = [
            shard.renew_lock(held, lease) for shard, held in zip(self.shards, leases, strict=True)
        ]
        fresh = [held for held in renewed if held is not None]
        if len(fresh) < len(renewed):  # lost on one shard: lost, and the others given back
            with self._leases_guard:
                self._leases.pop(key, None)
            for shard, held in zip(self.shards, renewed, strict=True):
                if held is not None:
                    shard.release_lock(held)
            return None
        with self._leases_guard:
            self._leases[key] = fresh
        return fresh[0]

    def release_lock(self, lock: LockLease) -> bool:
        with self._leases_guard:
            leases = self._leases.pop((lock.name, lock.token), None)
        if leases is None:
            return False
        released = [
            shard.release_lock(held) for shard, held in zip(self.shards, leases, strict=True)
        ]
        return all(released)

    def lock_holder(self, name: str) -> LockLease | None:
        return self.home.lock_holder(name)

    # -- RecurringStore: a recurring job and its firings live in one shard ----------------------

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        return self._shard_for(recurring.id).save_recurring(recurring, mode)

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        return self._shard_for(recurring_id).get_recurring(recurring_id)

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        positive_count("limit", limit)
        non_negative_offset(offset)
        parts = [shard.list_recurring(offset + limit, 0) for shard in self.shards]
        return _merged(parts, lambda record: record.id, offset + limit)[offset:]

    def remove_recurring(self, recurring_id: str) -> bool:
        return self._shard_for(recurring_id).remove_recurring(recurring_id)

    def set_recurring_enabled(
        self, recurring_id: str, enabled: bool, next_run_at: float | None
    ) -> bool:
        return self._shard_for(recurring_id).set_recurring_enabled(
            recurring_id, enabled, next_run_at
        )

    def fetch_due_recurring(self, limit: int) -> list[RecurringRecord]:
        positive_count("limit", limit)
        parts = [shard.fetch_due_recurring(limit) for shard in self.shards]
        return _merged(parts, lambda record: (record.next_run_at, record.id), limit)

    def next_recurring_at(self) -> float | None:
        times = [t for shard in self.shards if (t := shard.next_recurring_at()) is not None]
        return min(times, default=None)

    def fire_recurring(
        self, recurring_id: str, version: int, lock: LockLease, firing: Firing
    ) -> list[bool] | None:
        shard = shard_of(recurring_id, len(self.shards))
        strays = [job.id for job in firing.jobs if shard_of(job.id, len(self.shards)) != shard]
        if strays:
            raise InvalidArgumentError(
                f"firing job id(s) {strays[:3]!r} do not fall in recurring job {recurring_id!r}'s "
                "shard: a firing's id must be '<recurring id>@<UTC time>Z' (see firing_ids.py)"
            )
        held = self._lease_on(lock, shard)
        if held is None:
            return None
        return self.shards[shard].fire_recurring(recurring_id, version, held, firing)

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
        return _merged(parts, _job_order, limit)

    def finished_counts(
        self, state: JobState, since: float, bucket: float
    ) -> list[tuple[float, int]]:
        totals: dict[float, int] = {}
        for shard in self.shards:
            for start, count in shard.finished_counts(state, since, bucket):
                totals[start] = totals.get(start, 0) + count
        return sorted(totals.items())


def _known(values: Iterator[float | None]) -> Iterator[float]:
    return (value for value in values if value is not None)
