"""Retention: deleting old finished jobs (enqueued, cancelled, expired) so storage stops growing
with every job ever released, without slowing a single release down.

The purge runs beside the delayed scheduler's passes, never inside them, in a thread of its own
under a lock of its own (``retention``): one process purges at a time, and a pass never waits
for a purge to finish (a pass that purged after its releases was measured at 383 ms instead of
4.6 ms with 1,000,000 finished jobs on PostgreSQL, and every release due meanwhile waited too).
What a purge can still take from releases is the storage server's time, which it bounds:

* **short slices**: each slice deletes about as many jobs as fit in ``SLICE_BUDGET`` seconds,
  sized from the previous slice (at most twice or half its size, between ``MIN_SLICE`` and
  ``MAX_SLICE`` jobs), so one Lua script or one DELETE never holds Redis or a PostgreSQL backend
  for long. The floor matters where a slice's fixed cost (round trips: three for a PostgreSQL
  purge) outweighs the budget on its own: sizing by pace alone would shrink such slices to one
  job each and the drain to a crawl (25 jobs/s, measured);
* **a duty cycle**: after a slice of ``d`` seconds it pauses ``d * (1 - DUTY) / DUTY``, so a
  backlog takes at most ``DUTY`` of the server's time while it drains (1,000,000 jobs: about a
  minute on Redis, a few on PostgreSQL);
* **idle when done**: once a slice comes back short (nothing more to delete) it releases the
  lock and looks again after ``PURGE_EVERY`` seconds.

A purge that fails is logged and retried after ``PURGE_EVERY``: retention never stops releases.
With shards, each shard's delayed scheduler has a purger of its own, under the shard's own
``retention`` lock, that purges only while its shard is served by this process (``serving``).
The recurring jobs' firing history needs no purge: each record keeps its last
``recurring_jobs.HISTORY_LIMIT`` firings only, and the firing jobs are finished jobs like others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from parallel_scheduler.clock import StorageClock
from parallel_scheduler.engine import held_lock
from parallel_scheduler.log_format import event
from storage_adapters import LockStore, RetentionStore, StorageError
from storage_adapters.checks.retention import PURGEABLE_STATES

__all__ = [
    "DUTY",
    "LOCK_NAME",
    "MAX_SLICE",
    "MIN_SLICE",
    "PURGE_EVERY",
    "SLICE_BUDGET",
    "RetentionPurger",
]

logger = logging.getLogger(__name__)
LOCK_NAME = "retention"
#: Seconds between looks once there was nothing more to delete (and after a failure).
PURGE_EVERY = 5.0
#: What one slice may take, in seconds: the longest a purge holds the server at a time.
SLICE_BUDGET = 0.002
#: The fewest and the most jobs one slice deletes; the first slice deletes the fewest.
MIN_SLICE = 100
MAX_SLICE = 1000
#: The share of time a draining purge spends in slices.
DUTY = 0.1


class PurgingStore(RetentionStore, LockStore, Protocol):
    """What retention needs of storage: purging, and the lock that keeps it to one process."""


class RetentionPurger:
    """Deletes jobs finished more than ``retention`` seconds ago, slice by slice, in its thread."""

    def __init__(
        self,
        storage: PurgingStore,
        clock: StorageClock,
        retention: float | None,
        owner: str,
        lease: float,
        *,
        every: float = PURGE_EVERY,
        budget: float = SLICE_BUDGET,
        duty: float = DUTY,
        serving: Callable[[], bool] | None = None,
    ) -> None:
        """``serving``: purge only while it says so (a shard served by this process)."""
        self._storage = storage
        self._clock = clock
        self._retention = retention or None  # 0 keeps everything, as None does
        self._owner = owner
        self._lease = lease
        self._every = every
        self._budget = budget
        self._duty = duty
        self._serving = serving or (lambda: True)
        self._slice = MIN_SLICE
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._total = 0
        self._guard = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._retention is not None

    @property
    def purged(self) -> int:
        """Jobs this purger deleted since it was made."""
        with self._guard:
            return self._total

    def purge_slice(self) -> tuple[int, bool]:
        """One slice, without the lock (the caller holds it, or purges by hand): how many it
        deleted, and whether it came back full (more may be left)."""
        if self._retention is None:
            return 0, False
        asked = self._slice
        cutoff = self._clock.now() - self._retention
        started = time.monotonic()
        deleted = self._storage.purge_finished(PURGEABLE_STATES, cutoff, asked)
        took = time.monotonic() - started
        if deleted >= asked:  # a full slice tells how long this size takes
            fitting = int(asked * self._budget / max(took, 1e-6))
            self._slice = max(MIN_SLICE, asked // 2, min(MAX_SLICE, asked * 2, fitting))
        if deleted:
            with self._guard:
                self._total += deleted
        return deleted, deleted >= asked

    def start(self) -> None:
        """Purge in a daemon thread until ``stop()``; does nothing when retention is off."""
        if self._retention is None or self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the slice in flight (one slice: ``SLICE_BUDGET``, about) and free the lock."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._serving():
                    self._drain()
            except StorageError as exc:
                logger.warning("purging finished jobs failed, retrying later: %s", exc)
            except Exception:
                logger.exception("purging finished jobs failed, retrying later")
            self._stopping.wait(self._every)

    def _drain(self) -> None:
        """Under the lock: slices with pauses until one comes back short, the lock is lost, or
        the purger stops."""
        held = held_lock.acquire(self._storage, LOCK_NAME, self._owner, self._lease)
        if held is None:
            return  # another process purges
        began, total = time.monotonic(), 0
        try:
            while held.valid() and not self._stopping.is_set() and self._serving():
                started = time.monotonic()
                deleted, full = self.purge_slice()
                total += deleted
                if not full:
                    break
                took = time.monotonic() - started
                self._stopping.wait(took * (1 - self._duty) / self._duty)
        finally:
            held.release()
        if total:
            logger.info(
                "purged %d finished job(s) past retention in %.1f s",
                total,
                time.monotonic() - began,
                extra=event(purged=total),
            )
