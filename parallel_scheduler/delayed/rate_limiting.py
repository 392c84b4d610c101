"""Where a claimed job meets its rate limits: the limits in force are read once a pass, a release
slot is reserved in storage for each claimed job of a limited queue or task
(``RateLimitStore.reserve_release_slots``, one atomic call per limit per chunk, shared by every
scheduler process and shard), and the jobs whose slot has not come are given back due at it
(``defer``), so they wait Scheduled, in due order, read again only when their slot comes; then
they are sent on the slot they hold (``ClaimedJob.slot_at``), without reserving another."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from functools import partial

from parallel_scheduler.engine.recorder import NULL_RECORDER, MetricsRecorder
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.rate_limits import rate_text
from storage_adapters import ChunkSettlement, ClaimedJob, PauseKind, RateLimitStore
from storage_adapters.records import RateLimitRecord, Reservation

__all__ = ["ReleaseLimits", "limit_note"]


_Key = tuple[PauseKind, str]
#: Seconds a read of the limits serves ``active_now`` before it is read again.
STALE_AFTER = 1.0


def limit_note(limit: RateLimitRecord) -> str:
    """What a deferred job's ``last_error`` says: which limit it waits for."""
    rate = rate_text(limit.count, limit.period)
    return f"waiting for the rate limit of {limit.kind.value} {limit.name!r} ({rate})"


class ReleaseLimits:
    """The rate limits of one scheduler's passes: ``refresh`` at the start of a pass, ``admit``
    for every chunk of claims before it is sent (from any pool thread)."""

    def __init__(self, storage: RateLimitStore) -> None:
        self._storage = storage
        self._limits: dict[_Key, RateLimitRecord] = {}
        self._lock = threading.Lock()
        self._read_at = -math.inf
        self.metrics: MetricsRecorder = NULL_RECORDER

    @property
    def active(self) -> bool:
        """True when a limit was in force at the start of this pass."""
        return bool(self._limits)

    def active_now(self) -> bool:
        """``active``, read afresh when the last read is older than ``STALE_AFTER`` seconds: for
        the recurring scheduler's pushes, which may run while no release pass does."""
        if time.monotonic() - self._read_at > STALE_AFTER:
            self.refresh()
        return self.active

    def refresh(self) -> None:
        """Read the limits in force (one round trip): a limit set or removed takes effect from
        the next pass of every scheduler."""
        limits = call_storage(self._storage.list_rate_limits)
        with self._lock:
            self._limits = {(limit.kind, limit.name): limit for limit in limits}
            self._read_at = time.monotonic()

    def admit(
        self, claims: Sequence[ClaimedJob], settlement: ChunkSettlement
    ) -> tuple[list[ClaimedJob], int]:
        """The claims that may be sent now, in their order, and how many were deferred: each
        limited claim gets a slot of every limit it falls under (its queue's, its task's), and
        waits for the later of them."""
        if not self._limits:  # the release's usual case: no limit in force, nothing to read
            return list(claims), 0
        waits = self._waits(claims)
        if not waits:
            return list(claims), 0
        by_limit: dict[_Key, list[int]] = {}
        for place in sorted(waits):
            by_limit.setdefault(waits[place][1], []).append(place)
        for key, places in by_limit.items():
            note = limit_note(self._limits[key])
            slots = [waits[p][0] for p in places]
            settlement.defer([claims[p] for p in places], slots, note)
            for place, slot in zip(places, slots, strict=True):
                self.metrics.lateness(slot - claims[place].due_at, "rate_limit")
        return [c for p, c in enumerate(claims) if p not in waits], len(waits)

    def _waits(self, claims: Sequence[ClaimedJob]) -> dict[int, tuple[float, _Key]]:
        """For each claim whose slot has not come (by its place in ``claims``): its latest slot
        and the limit that set it. One reservation per limit, for all its claims in order."""
        limits = self._limits
        by_key: dict[_Key, list[int]] = {}
        for place, claim in enumerate(claims):
            if claim.slot_at is not None and claim.slot_at == claim.due_at:
                continue  # given back due at its slot, which it holds: it goes on it
            for key in _keys(claim):
                if key in limits:
                    by_key.setdefault(key, []).append(place)
        waits: dict[int, tuple[float, _Key]] = {}
        for key, places in by_key.items():
            reservation = call_storage(partial(self._reserve, key, len(places)))
            if reservation is None:  # removed since the pass began: no wait
                continue
            for place, slot in zip(places, reservation.slots, strict=True):
                if slot > reservation.now and slot > waits.get(place, (0.0, key))[0]:
                    waits[place] = (slot, key)
        return waits

    def _reserve(self, key: _Key, count: int) -> Reservation | None:
        return self._storage.reserve_release_slots(key[0], key[1], count)


def _keys(claim: ClaimedJob) -> list[_Key]:
    keys = [(PauseKind.TASK, claim.task)]
    if claim.queue is not None:
        keys.append((PauseKind.QUEUE, claim.queue))
    return keys
