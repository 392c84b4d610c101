"""The settlement of claims taken one storage call at a time (``claim``/``claim_due``): each
write that ends a claim otherwise than Enqueued is a storage call of its own."""

from __future__ import annotations

from collections.abc import Sequence

from parallel_scheduler.engine.retrying import call_storage
from storage_adapters import ClaimedJob, Storage

__all__ = ["StorageSettlement"]


class StorageSettlement:
    """``ChunkSettlement`` for claims taken by ``claim``/``claim_due``: each write is a storage
    call of its own, retried while storage is unreachable."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        call_storage(lambda: self._storage.expire(claims, reason))

    def unclaim(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        call_storage(lambda: self._storage.unclaim(claims, reason))

    def back_off(self, claims: Sequence[ClaimedJob], reason: str, delay: float) -> None:
        call_storage(lambda: self._storage.back_off(claims, reason, delay))

    def fail(self, claims: Sequence[ClaimedJob], reason: str) -> None:
        call_storage(lambda: self._storage.fail(claims, reason))

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> None:
        call_storage(lambda: self._storage.defer(claims, due_ats, note))
