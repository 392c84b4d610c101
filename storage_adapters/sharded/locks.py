"""The lock of a ``ShardedStorage`` (``LockStore``): a whole-store lock is every shard's lock,
taken shard 0 first and given back on all of them if one is busy, so each shard fences by its own
lease whatever a holder does on it."""

from __future__ import annotations

from collections.abc import Iterable

from storage_adapters.records import LockLease
from storage_adapters.sharded.shard_set import ShardSet

__all__ = ["ShardedLockStore"]


class ShardedLockStore(ShardSet):
    """Acquire, renew, release and read the whole-store lock, for ``ShardedStorage``."""

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
