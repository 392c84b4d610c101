"""The worker's background writer of execution outcomes: events go into a bounded buffer that a
daemon thread drains into storage in batches (``OutcomeStore.record_outcomes``), every
``FLUSH_EVERY`` seconds or ``BATCH`` events, whichever comes first.

Putting an event is one append to a deque (atomic under the GIL, no lock, no wake-up): the
thread sleeps until its deadline, or until a batch is full, so a busy worker does not pay for a
thread switch per event.

A task never waits for it and never fails because of it: ``put`` returns at once, and an event
that finds the queue full, or a batch storage refused, is dropped and counted, with a warning at
most once a minute that says how many went. The storage is opened in the thread on first use
(never before a fork) and reopened after an error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from storage_adapters import OutcomeEvent, OutcomeStore
from storage_adapters.checks.outcomes import MAX_OUTCOME_BATCH

__all__ = ["BATCH", "CAPACITY", "FLUSH_EVERY", "OutcomeWriter"]

logger = logging.getLogger(__name__)

#: Seconds an event waits at most before its batch is written.
FLUSH_EVERY = 0.5
#: Events per write at most.
BATCH = 500
#: Events the queue holds at most; past it, new events are dropped (and counted).
CAPACITY = 20_000
#: Seconds between two warnings about dropped events.
WARN_EVERY = 60.0

assert BATCH <= MAX_OUTCOME_BATCH


class OutcomeWriter:
    """One process's writer: ``put`` events, ``close`` at the end to write what is left."""

    def __init__(
        self,
        open_store: Callable[[], OutcomeStore],
        *,
        flush_every: float = FLUSH_EVERY,
        batch: int = BATCH,
        capacity: int = CAPACITY,
    ) -> None:
        self._open_store = open_store
        self._store: OutcomeStore | None = None
        self._flush_every = flush_every
        self._batch = batch
        self._capacity = capacity
        self._events: deque[OutcomeEvent] = deque()
        self._wake = threading.Event()  # a batch is full, or closing
        self._closing = False
        self._guard = threading.Lock()
        #: Events dropped so far (queue full, or storage refused their batch).
        self.dropped = 0
        #: Events written so far.
        self.written = 0
        self._unreported = 0
        self._warned_at = -WARN_EVERY
        self._thread = threading.Thread(target=self._run, name="outcome-writer", daemon=True)
        self._thread.start()

    def put(self, event: OutcomeEvent) -> None:
        """Queue one event; never blocks, never raises."""
        events = self._events
        if len(events) >= self._capacity:
            self._drop(1, "the queue is full")
            return
        events.append(event)
        if len(events) >= self._batch:
            self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self._flush_every)
            self._wake.clear()
            closing = self._closing
            while self._events:
                self._write(self._take(self._batch))
            if closing:
                self._close_store()
                return

    def _take(self, most: int) -> list[OutcomeEvent]:
        """Up to ``most`` of the oldest events, taken off the buffer (``popleft`` is atomic, so
        ``put`` may run meanwhile)."""
        taken: list[OutcomeEvent] = []
        events = self._events
        while events and len(taken) < most:
            taken.append(events.popleft())
        return taken

    def _write(self, events: list[OutcomeEvent]) -> None:
        if not events:
            return
        try:
            if self._store is None:
                self._store = self._open_store()
            self._store.record_outcomes(events)
        except Exception as exc:  # never let storage stop the writer (or a task)
            self._close_store()
            self._drop(len(events), f"storage refused them ({type(exc).__name__}: {exc})")
        else:
            self.written += len(events)

    def _close_store(self) -> None:
        store, self._store = self._store, None
        close = getattr(store, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # closing a broken connection may fail too
                logger.debug("closing the outcome store failed", exc_info=True)

    def _drop(self, count: int, why: str) -> None:
        with self._guard:
            self.dropped += count
            self._unreported += count
            now = time.monotonic()
            if now - self._warned_at < WARN_EVERY:
                return
            unreported, self._unreported, self._warned_at = self._unreported, 0, now
        logger.warning(
            "parallel-scheduler dropped %d execution outcome(s) (%d in all): %s",
            unreported,
            self.dropped,
            why,
        )
