"""The distributed-lock part of the ``Storage`` contract (``LockStore``) for ``RedisStorage`` to
inherit: ``lock:<name>`` (a hash with a TTL: owner, token, lease end) and ``fence:<name>`` (the
fencing counter, kept when the lock is freed, so every holder's token is greater than any before).
"""

from __future__ import annotations

from storage_adapters.records import LockLease, validate_lock_name
from storage_adapters.redis.jobs import lease_arg
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["RedisLockStore"]


class RedisLockStore(RedisPlumbing):
    """Acquire, renew, release and read the fenced lock, for ``RedisStorage`` to inherit."""

    def acquire_lock(self, name: str, owner: str, lease: float) -> LockLease | None:
        validate_lock_name(name)
        keys = [self._key(f"lock:{name}"), self._key(f"fence:{name}")]
        won = self._run("acquire_lock", keys, [owner, lease_arg(lease)])
        if not won:
            return None
        return LockLease(name=name, owner=owner, token=int(won[0]), expires_at=float(won[1]))

    def renew_lock(self, lock: LockLease, lease: float) -> LockLease | None:
        args = [lock.owner, str(lock.token), lease_arg(lease)]
        expires_at = self._run("renew_lock", [self._key(f"lock:{lock.name}")], args)
        if expires_at is None:
            return None
        return LockLease(lock.name, lock.owner, lock.token, float(expires_at))

    def release_lock(self, lock: LockLease) -> bool:
        args = [lock.owner, str(lock.token)]
        return bool(self._run("release_lock", [self._key(f"lock:{lock.name}")], args))

    def lock_holder(self, name: str) -> LockLease | None:
        validate_lock_name(name)
        held = self._run("lock_holder", [self._key(f"lock:{name}")], [])
        if not held:
            return None
        owner, token, expires_at = held
        return LockLease(name=name, owner=owner, token=int(token), expires_at=float(expires_at))
