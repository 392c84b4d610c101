"""The worker's background writer of execution outcomes: events go into a bounded queue that a
daemon thread drains into storage in batches (``OutcomeStore.record_outcomes``), every
``FLUSH_EVERY`` seconds or ``BATCH`` events, whichever comes first.

A task never waits for it and never fails because of it: ``put`` returns at once, and an event
that finds the queue full, or a batch storage refused, is dropped and counted, with a warning at
most once a minute that says how many went. The storage is opened in the thread on first use
(never before a fork) and reopened after an error.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
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
        self._queue: queue.Queue[OutcomeEvent | None] = queue.Queue(maxsize=capacity)
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
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._drop(1, "the queue is full")

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        pending: list[OutcomeEvent] = []
        deadline: float | None = None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                pass
            else:
                if item is None:
                    self._write(pending)
                    self._close_store()
                    return
                pending.append(item)
                if deadline is None:
                    deadline = time.monotonic() + self._flush_every
            due = deadline is not None and time.monotonic() >= deadline
            if pending and (due or len(pending) >= self._batch):
                self._write(pending)
                pending, deadline = [], None

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
