"""The storage clock estimate keeps working when a refresh cannot reach storage."""

from __future__ import annotations

from pathlib import Path

import storage_adapters
from parallel_scheduler.clock import StorageClock


def test_a_failed_refresh_keeps_the_last_offset(tmp_path: Path) -> None:
    # Given a clock measured once against a real store, refreshed on every read
    storage = storage_adapters.from_url(f"sqlite:///{tmp_path / 'c.db'}")
    storage.setup()
    clock = StorageClock(storage, refresh_every=0.0)
    first = clock.now()
    # When the store goes away (closed: every call now fails)
    storage.close()
    # Then reads go on from the last offset instead of failing the caller
    assert clock.now() >= first
