"""The release path reads a claimed job's expiry through ``envelopes.release_facts``; a payload it
cannot read is no expiry of its own: the job goes to its dispatcher, which fails on it and says
why, and the job alone backs off Scheduled with that error, as a job that cannot be sent does."""

from __future__ import annotations

from typing import Any

import pytest

from parallel_scheduler import CallableDispatcher, DelayedJobScheduler, JobState, Settings
from storage_adapters import NewJob, Storage


def _never_called(*args: Any) -> None:
    raise AssertionError("an unreadable payload reached the send")


@pytest.mark.parametrize("release_mode", ["per_job", "batch"])
@pytest.mark.parametrize("payload", ["{not json", '{"options": {"expires": ', "[1, 2]"])
def test_an_unreadable_payload_backs_off_alone_not_a_failed_pass(
    storage: Storage, release_mode: str, payload: str
) -> None:
    # Given a due job whose stored payload cannot be read (written by hand, or by a bug)
    storage.add_jobs([NewJob(id="unreadable", task="t", payload=payload, due_at=storage.now() - 1)])
    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(_never_called), Settings(release_mode=release_mode)
    )
    # When a pass releases it
    try:
        stats = scheduler.run_once()
    finally:
        scheduler.close()
    # Then the pass ends normally (no failed send: the job's own fault), and the job waits,
    # saying why
    assert (stats.fetched, stats.failed, stats.released, stats.expired) == (1, 0, 0, 0)
    assert stats.backed_off == 1
    record = storage.get_job("unreadable")
    assert record is not None and record.state is JobState.SCHEDULED
    assert record.last_error is not None and "do not decode" in record.last_error
    assert record.due_at > storage.now()  # backed off: not claimed first again next pass
