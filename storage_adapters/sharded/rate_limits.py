"""The rate limits of a ``ShardedStorage`` (``RateLimitStore``): one budget for the whole store.

A limit bounds the releases of a queue or task over every shard together, so it must be one
counter, not one per shard (S shards each spending ``count`` per period would release S times
the limit). The limits therefore live in shard 0 only (``home``, which keeps the whole store's
instances and shard count too): ``set_rate_limit``, ``remove_rate_limit``, ``list_rate_limits``
and ``reserve_release_slots`` all go there, so every scheduler of every shard reserves from the
same atomic step on shard 0's clock, and the slots it hands out are the store's. The other
shards' own limit keys or rows stay empty.

``defer`` settles each claim on the shard its job lives in, as the other settle operations do
(``sharded/release.py``): each shard fences its own claims by their tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_adapters.checks.pauses import check_pause_name
from storage_adapters.checks.rate_limits import (
    check_deferral,
    check_rate_limit,
    check_reservation,
)
from storage_adapters.records import ClaimedJob, PauseKind, RateLimitRecord, Reservation
from storage_adapters.sharded.shard_set import ShardSet

__all__ = ["ShardedRateLimitStore"]


class ShardedRateLimitStore(ShardSet):
    """Rate limits kept in shard 0 for the whole store; deferrals on each job's own shard."""

    def set_rate_limit(
        self, kind: PauseKind, name: str, count: int, period: float, burst: int, set_by: str
    ) -> None:
        self.home.set_rate_limit(*check_rate_limit(kind, name, count, period, burst, set_by))

    def remove_rate_limit(self, kind: PauseKind, name: str) -> bool:
        return self.home.remove_rate_limit(*check_pause_name(kind, name))

    def requeue_waiting(self, kind: PauseKind, name: str) -> int:
        """Every shard's waiting jobs (shard 0's forgets the limit's reserved slots too)."""
        checked = check_pause_name(kind, name)
        return sum(shard.requeue_waiting(*checked) for shard in self.shards)

    def list_rate_limits(self) -> list[RateLimitRecord]:
        return self.home.list_rate_limits()

    def reserve_release_slots(self, kind: PauseKind, name: str, count: int) -> Reservation | None:
        return self.home.reserve_release_slots(*check_reservation(kind, name, count))

    def after_deferring(self, deferred: int) -> None:
        """Every shard tidies (a pass over the whole store deferred jobs of any shard)."""
        for shard in self.shards:
            shard.after_deferring(deferred)

    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> list[str]:
        """Each shard's claims in one step of that shard, with their own due times; the whole
        call checked before any shard writes."""
        dues, note = check_deferral(claims, due_ats, note)
        done: list[str] = []
        for shard, positions in sorted(self._by_shard(claim.id for claim in claims).items()):
            part = [claims[p] for p in positions]
            done.extend(self.shards[shard].defer(part, [dues[p] for p in positions], note))
        return done
