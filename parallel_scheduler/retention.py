"""Retention inside the delayed scheduler's passes: the lock holder deletes old finished jobs
(enqueued, cancelled, expired), one bounded batch at a time, so storage stops growing with every
job ever released while no single statement or script holds the table or the server for long.

Three rules keep it out of the way of releases:

* due work first: a pass purges only after its release loop found no more due jobs;
* one batch per pass, of ``batch_size`` jobs at most, served by an index on finish time;
* throttled: after a batch that was not full (nothing more to delete) the next purge waits
  ``PURGE_EVERY`` seconds, so an idle scheduler does not send a delete every poll; after a full
  one the next pass purges again, so a backlog drains at one batch per pass.

A purge that fails is logged and retried after ``PURGE_EVERY``: retention never stops releases.
The recurring jobs' firing history needs no purge: each record keeps its last
``recurring_jobs.HISTORY_LIMIT`` firings only, and the firing jobs are finished jobs like others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from storage_adapters import RetentionStore, StorageError
from storage_adapters.retention import PURGEABLE_STATES

from .clock import StorageClock

__all__ = ["PURGE_EVERY", "InPassPurge"]

logger = logging.getLogger(__name__)
#: Seconds between purges once there was nothing more to delete.
PURGE_EVERY = 5.0


class InPassPurge:
    """Decides when the lock holder purges, and purges one batch."""

    def __init__(
        self,
        storage: RetentionStore,
        clock: StorageClock,
        retention: float | None,
        batch: int,
        *,
        every: float = PURGE_EVERY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._retention = retention or None  # 0 keeps everything, as None does
        self._batch = batch
        self._every = every
        self._monotonic = monotonic
        self._next = -float("inf")  # monotonic time of the next allowed purge

    @property
    def enabled(self) -> bool:
        return self._retention is not None

    def due(self) -> bool:
        return self._retention is not None and self._monotonic() >= self._next

    def run(self) -> int:
        """Delete one batch of jobs finished more than ``retention`` ago; how many."""
        if self._retention is None:
            return 0
        cutoff = self._clock.now() - self._retention
        try:
            purged = self._storage.purge_finished(PURGEABLE_STATES, cutoff, self._batch)
        except StorageError as exc:
            logger.warning("purging finished jobs failed, retrying later: %s", exc)
            purged = 0
        full = purged >= self._batch
        self._next = self._monotonic() + (0.0 if full else self._every)
        if purged:
            logger.debug("purged %d finished job(s) older than %.0f s", purged, self._retention)
        return purged
