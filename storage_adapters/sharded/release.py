"""The release hand-off of a ``ShardedStorage`` (``ReleaseStore``): due jobs read and claimed across
the shards in the contract's order, and claims settled on the shard each lives in, under the
lease the whole-store lock holds there."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from storage_adapters.base import Storage
from storage_adapters.checks.browse import MAX_PAGE
from storage_adapters.checks.values import error_text, positive_count, positive_seconds
from storage_adapters.paging import walk_jobs
from storage_adapters.records import ClaimedJob, JobQuery, JobState, LockLease
from storage_adapters.sharded.shard_set import ShardSet, merged
from storage_adapters.sharding import shard_of

__all__ = ["ShardedReleaseStore"]

_SCHEDULED = JobState.SCHEDULED


class ShardedReleaseStore(ShardSet):
    """Read, claim, settle and recover due jobs over every shard, for ``ShardedStorage``."""

    def _due_heads(self, limit: int) -> list[tuple[float, str, int]]:
        """The ``limit`` earliest due scheduled jobs over every shard: (due_at, id, shard)."""
        query = JobQuery(state=_SCHEDULED, due_to=self.now())
        parts = [list(self._shard_heads(k, query, limit)) for k in range(len(self.shards))]
        return merged(parts, lambda head: head[:2], limit)

    def _shard_heads(
        self, shard: int, query: JobQuery, limit: int
    ) -> Iterator[tuple[float, str, int]]:
        """Up to ``limit`` of one shard's due jobs, earliest first, a keyset page at a time."""
        pages = walk_jobs(self.shards[shard], query, min(limit, MAX_PAGE))
        return ((job.due_at, job.id, shard) for job in itertools.islice(pages, limit))

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


def _known(values: Iterator[float | None]) -> Iterator[float]:
    return (value for value in values if value is not None)
