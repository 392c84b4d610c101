"""The distributed lock in SQL, with a fencing token that grows with every new holder: the
``LockStore`` family of ``SQLStorage``."""

from __future__ import annotations

from storage_adapters.checks.values import positive_seconds
from storage_adapters.records import LockLease, validate_lock_name
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLLockStore"]


class SQLLockStore(SQLPlumbing):
    """Acquire, renew, release and read a named lock, for ``SQLStorage`` to inherit."""

    def acquire_lock(self, name: str, owner: str, lease: float) -> LockLease | None:
        validate_lock_name(name)
        params = {"lock_name": name, "lock_owner": owner, "lease": positive_seconds("lease", lease)}
        rows = self._rows(self._sql.acquire_lock, params)
        if not rows:
            return None
        return LockLease(name, owner, int(rows[0].token), float(rows[0].expires_at))

    def renew_lock(self, lock: LockLease, lease: float) -> LockLease | None:
        params = {**self._lease_params(lock), "lease": positive_seconds("lease", lease)}
        expires_at = self._scalar(self._sql.renew_lock, params)
        if expires_at is None:
            return None
        return LockLease(lock.name, lock.owner, lock.token, float(expires_at))

    def release_lock(self, lock: LockLease) -> bool:
        return self._changed(self._sql.release_lock, self._lease_params(lock)) == 1

    def lock_holder(self, name: str) -> LockLease | None:
        validate_lock_name(name)
        rows = self._rows(self._sql.lock_holder, {"lock_name": name})
        if not rows:
            return None
        return LockLease(name, rows[0].owner, int(rows[0].token), float(rows[0].expires_at))
