"""The shards behind a ``ShardedStorage`` and what routes to them: which shard an id lives in, the
lease a whole-store lock holds on each shard, and merging the shards' sorted answers."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from storage_adapters.base import Storage
from storage_adapters.records import LockLease
from storage_adapters.sharding import check_shards, shard_of

__all__ = ["ShardSet", "merged"]

T = TypeVar("T")


def merged(parts: Iterable[Iterable[T]], key: Callable[[T], Any], limit: int) -> list[T]:
    """The first ``limit`` items of sorted ``parts``, merged in ``key`` order."""
    return list(itertools.islice(heapq.merge(*parts, key=key), limit))


class ShardSet:
    """``shards`` (shard 0 first), each a complete store, and the whole-store locks held on them;
    the base of ``ShardedStorage``'s families."""

    def __init__(self, shards: Sequence[Storage]) -> None:
        check_shards(len(shards))
        self.shards: tuple[Storage, ...] = tuple(shards)
        self.home = self.shards[0]
        # held whole-store locks: (name, token) -> the lease on each shard, shard 0 first
        self._leases: dict[tuple[str, int], list[LockLease]] = {}
        self._leases_guard = threading.Lock()

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

    def _lease_on(self, lock: LockLease, shard: int) -> LockLease | None:
        with self._leases_guard:
            leases = self._leases.get((lock.name, lock.token))
        return None if leases is None else leases[shard]

    def now(self) -> float:
        """The whole store's clock: shard 0's (every shard is on the same server)."""
        return self.home.now()
