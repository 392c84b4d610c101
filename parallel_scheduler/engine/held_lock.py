"""Holding the scheduler lock: renewal in the background, and a local check before every send.

The lease is renewed every third of its length. The holder also keeps a conservative local
deadline (measured from *before* each acquire/renew request went out, on the monotonic clock); once
it passes, the holder stops sending even if the renewal thread has not noticed yet. That is what
makes a holder that was stalled (GC pause, SIGSTOP, swapped out) step aside instead of acting on a
lease that another scheduler may already hold; storage then fences its writes by token as well.
"""

from __future__ import annotations

import logging
import threading
import time

from storage_adapters import LockLease, LockStore, StorageError

__all__ = ["HeldLock", "acquire"]

logger = logging.getLogger(__name__)
SAFETY_MARGIN = 0.1  # of the lease: stop acting a little before the storage says it ends


class HeldLock:
    def __init__(
        self, storage: LockStore, lease: LockLease, duration: float, started: float
    ) -> None:
        self._storage = storage
        self._duration = duration
        self._lease = lease
        self._valid_until = started + duration * (1 - SAFETY_MARGIN)
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name="lock-renewal", daemon=True)
        self._thread.start()

    @property
    def lease(self) -> LockLease:
        return self._lease

    def valid(self) -> bool:
        """True while this process may still act as the holder."""
        return not self._lost.is_set() and time.monotonic() < self._valid_until

    def _renew_loop(self) -> None:
        while not self._done.wait(self._duration / 3):
            started = time.monotonic()
            try:
                renewed = self._storage.renew_lock(self._lease, self._duration)
            except StorageError as exc:
                logger.warning("renewing lock %s failed: %s", self._lease.name, exc)
                continue
            if renewed is None:
                logger.warning("lock %s was lost (token %d)", self._lease.name, self._lease.token)
                self._lost.set()
                return
            self._lease = renewed
            self._valid_until = started + self._duration * (1 - SAFETY_MARGIN)

    def release(self) -> None:
        self._done.set()
        self._thread.join()
        if self._lost.is_set():
            return
        try:
            self._storage.release_lock(self._lease)
        except StorageError as exc:  # the lease runs out by itself
            logger.warning("releasing lock %s failed: %s", self._lease.name, exc)


def acquire(storage: LockStore, name: str, owner: str, duration: float) -> HeldLock | None:
    started = time.monotonic()
    lease = storage.acquire_lock(name, owner, duration)
    if lease is None:
        return None
    return HeldLock(storage, lease, duration, started)
