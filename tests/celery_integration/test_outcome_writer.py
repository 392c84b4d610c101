"""The worker's outcome writer against real storage: events reach storage in batches within a
flush interval, and storage that is down (a closed port) costs a task nothing: ``put`` returns at
once, the events are dropped and counted, with a warning, and the writer keeps going."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler.celery.outcome_writer import OutcomeWriter
from storage_adapters import OutcomeEvent, OutcomeState, Storage

S = OutcomeState


def events(count: int, prefix: str = "job") -> list[OutcomeEvent]:
    return [OutcomeEvent(f"{prefix}-{n}", "t", S.SUCCEEDED, 1000.0 + n) for n in range(count)]


def test_events_reach_storage_in_batches(make_storage: Callable[[], Storage]) -> None:
    # Given a writer over real storage (a connection of its own, which it closes at the end),
    # flushing every 0.2 s or 50 events
    storage = make_storage()
    writer = OutcomeWriter(make_storage, flush_every=0.2, batch=50)
    # When 120 events are put
    for event in events(120):
        writer.put(event)
    # Then they are all stored, soon, and nothing was dropped
    wait_until(lambda: storage.outcome_counts().get("t", {}).get(S.SUCCEEDED) == 120, timeout=10)
    assert writer.dropped == 0
    # And what is put just before close is written by close
    writer.put(events(1, "last")[0])
    writer.close()
    assert storage.outcome_history("last-0") != []


def test_storage_down_drops_events_with_a_counted_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a writer whose storage cannot be reached (nothing listens on port 1)
    def unreachable() -> Storage:
        return storage_adapters.from_url("redis://127.0.0.1:1/0", connect_timeout=0.2)

    writer = OutcomeWriter(unreachable, flush_every=0.05, batch=10, capacity=100)
    # When far more events are put than the queue holds, as fast as tasks would
    with caplog.at_level(logging.WARNING, "parallel_scheduler.celery.outcome_writer"):
        for event in events(1000):
            writer.put(event)  # (a put that waited for room would never return here)
        # Then every event was dropped and counted, with a warning
        wait_until(lambda: writer.dropped == 1000, timeout=30)
        writer.close(timeout=5)
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert warnings and "execution outcome(s)" in warnings[0]


class CountingStore:
    """Real storage, with the number of ``record_outcomes`` calls (one per batch written)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.writes: list[int] = []

    def record_outcomes(self, batch: list[OutcomeEvent]) -> None:
        self.writes.append(len(batch))
        self.storage.record_outcomes(batch)

    def close(self) -> None:
        self.storage.close()


def test_a_burst_is_written_in_batches_not_event_by_event(
    make_storage: Callable[[], Storage],
) -> None:
    # Given a writer flushing every 5 s or 100 events
    counted = CountingStore(make_storage())
    writer = OutcomeWriter(lambda: counted, flush_every=5.0, batch=100)  # type: ignore[arg-type]
    # When 1,000 events are put at once, as a busy worker's signals would
    for event in events(1000):
        writer.put(event)
    # Then they go in batches of at most 100, a handful of writes (not one per event)
    wait_until(lambda: sum(counted.writes) == 1000, timeout=30)
    assert max(counted.writes) == 100 and len(counted.writes) <= 20, counted.writes
    writer.close()
