"""The storage server's clock, estimated locally so hot paths need no round trip to read it.

Due times and leases are judged by the storage clock (so hosts with skewed clocks agree); a
process measures its offset from that clock at first use and refreshes it every
``refresh_every`` seconds (three reads each time), never per scheduler pass: an idle pass must
cost one round trip, its peek (see engine/locked_loop.py).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from storage_adapters import StorageError

__all__ = ["ClockSource", "StorageClock"]

logger = logging.getLogger(__name__)


class ClockSource(Protocol):
    """What reads the storage server's clock: every storage (``StorageAdmin.now``)."""

    def now(self) -> float: ...


class StorageClock:
    """``now()`` ~ ``storage.now()``, corrected for half the round trip of the measurement."""

    def __init__(self, storage: ClockSource, refresh_every: float = 60.0) -> None:
        self._storage = storage
        self._refresh_every = refresh_every
        self._offset = 0.0
        self._measured_at: float | None = None
        self._guard = threading.Lock()

    def sync(self, samples: int = 3) -> None:
        """Measure the offset now, keeping the sample with the shortest round trip: the error of
        an estimate is at most half its round trip, and one slow reply (a busy server, a GC
        pause) would otherwise skew every due time this process computes until the next refresh."""
        best_rtt, best_offset = float("inf"), 0.0
        for _ in range(max(1, samples)):
            before = time.time()
            server = self._storage.now()
            after = time.time()
            if after - before < best_rtt:
                best_rtt, best_offset = after - before, server - (before + after) / 2
        with self._guard:
            self._offset = best_offset
            self._measured_at = time.monotonic()

    def now(self) -> float:
        """The estimate; a refresh that fails keeps the last offset (an offset drifts slowly, and
        the callers on the release path must not fail half-way through a batch because of it)."""
        measured = self._measured_at
        if measured is None:
            self.sync()
        elif time.monotonic() - measured > self._refresh_every:
            try:
                self.sync()
            except StorageError as exc:
                logger.warning("refreshing the storage clock failed, keeping the last one: %s", exc)
        return time.time() + self._offset

    @property
    def offset(self) -> float:
        return self._offset
