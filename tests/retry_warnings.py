"""The WARNING lines a storage call retried under ``call_storage`` logs
(``parallel_scheduler.engine.retrying``), read back from pytest's ``caplog``."""

from __future__ import annotations

import pytest

RETRY_LOGGER = "parallel_scheduler.engine.retrying"


def announced_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits, in seconds, that the retry WARNING lines announced (``retrying in %.1f s``),
    unrounded: the line's third argument."""
    waits: list[float] = []
    for record in caplog.records:
        if record.name == RETRY_LOGGER:
            assert isinstance(record.args, tuple) and isinstance(record.args[2], float), record.args
            waits.append(record.args[2])
    return waits
