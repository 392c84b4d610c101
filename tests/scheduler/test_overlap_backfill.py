"""A backfill with an overlap policy (issue 25, §5 "Overlap") on every adapter: ``skip`` fires
only the range's latest tick, and nothing while a firing of the job runs; ``buffer_one`` fires
the ticks one after another, each once the one before has finished (here the test plays the
worker, recording each firing's outcome when it appears, and waits on conditions with
deadlines)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from typing import Any

import pytest

from parallel_scheduler import Client, InvalidJobError
from parallel_scheduler.cli import main
from parallel_scheduler.recurring import backfill as backfill_module
from parallel_scheduler.recurring import overlap
from parallel_scheduler.recurring.backfill import Backfill
from parallel_scheduler.recurring.jobs import firing_id
from storage_adapters import OutcomeState, Storage
from tests.scheduler.test_max_runs import MINUTE, fired_ticks, pass_at
from tests.scheduler.test_overlap import finish, minute_job
from tests.storage.entry_points import Store, opened


def wait_for(condition: Callable[[], bool], what: str, deadline: float = 20.0) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``deadline`` seconds."""
    give_up = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


def fired_count_is(storage: Storage, count: int) -> bool:
    return len(fired_ticks(storage, "m")) == count


def utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)


def test_a_skip_backfill_fires_only_the_latest_tick_and_none_while_a_firing_runs(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a skip job with nothing running, and a past range of five ticks
    client = Client(storage)
    start = minute_job(client, overlap="skip")
    done = client.recurring.backfill("m", utc(start), utc(start + 4 * MINUTE), overlap="skip")
    # Then only the latest tick fired; the others are reported skipped
    assert done.to_dict() == {"ticks": 5, "created": 1, "existing": 0, "skipped": 4}
    assert fired_ticks(storage, "m") == [start + 4 * MINUTE]
    # When a scheduled firing of the job runs (fired, no outcome yet)
    pass_at(storage, monkeypatch, start + 10 * MINUTE + 1)
    # Then a skip backfill fires nothing
    again = client.recurring.backfill("m", utc(start), utc(start + 2 * MINUTE), overlap="skip")
    assert (again.created, again.skipped) == (0, 3)
    assert fired_ticks(storage, "m") == [start + 4 * MINUTE, start + 10 * MINUTE]


def test_a_buffer_one_backfill_fires_each_tick_once_the_one_before_finished(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfill_module, "WAIT_POLL", 0.05)
    # Given a job with nothing running, and a past range of three ticks
    client = Client(storage)
    start = minute_job(client)
    ticks = [start + n * MINUTE for n in range(3)]
    result: list[Backfill] = []
    worker = threading.Thread(
        target=lambda: result.append(
            client.recurring.backfill("m", utc(ticks[0]), utc(ticks[-1]), overlap="buffer_one")
        )
    )
    worker.start()
    try:
        # Then each tick fires only once the one before has finished
        for n, tick in enumerate(ticks):
            wait_for(partial(fired_count_is, storage, n + 1), f"firing {n + 1}")
            assert fired_ticks(storage, "m") == ticks[: n + 1]
            finish(storage, firing_id("m", tick), storage.now(), OutcomeState.SUCCEEDED)
        worker.join(20)
    finally:
        finish(storage, firing_id("m", ticks[-1]), storage.now(), OutcomeState.SUCCEEDED)
        worker.join(20)
    assert not worker.is_alive()
    assert result[0].to_dict() == {"ticks": 3, "created": 3, "existing": 0, "skipped": 0}


def test_a_buffer_one_backfill_waits_for_a_running_firing_first(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfill_module, "WAIT_POLL", 0.05)
    # Given a job whose scheduled firing runs
    client = Client(storage)
    start = minute_job(client)
    pass_at(storage, monkeypatch, start + 1)
    running = firing_id("m", start)
    worker = threading.Thread(
        target=lambda: client.recurring.backfill(
            "m", utc(start + MINUTE), utc(start + 2 * MINUTE), overlap="buffer_one"
        )
    )
    worker.start()
    try:
        # Then nothing of the range fires while it runs (the backfill checks at least twice)
        calls: list[int] = []
        real = overlap.running_jobs

        def counted(*args: Any) -> set[str]:
            calls.append(1)
            return real(*args)

        monkeypatch.setattr(backfill_module, "running_jobs", counted)
        wait_for(lambda: len(calls) >= 2, "two looks at the running firing")
        assert fired_ticks(storage, "m") == [start]
        # and once it has finished, the range fires
        finish(storage, running, storage.now(), OutcomeState.SUCCEEDED)
        wait_for(lambda: len(fired_ticks(storage, "m")) == 2, "the first backfilled tick")
        finish(storage, firing_id("m", start + MINUTE), storage.now(), OutcomeState.SUCCEEDED)
        worker.join(20)
    finally:
        for tick in (start + MINUTE, start + 2 * MINUTE):
            finish(storage, firing_id("m", tick), storage.now(), OutcomeState.SUCCEEDED)
        worker.join(20)
    assert not worker.is_alive()
    assert fired_ticks(storage, "m") == [start, start + MINUTE, start + 2 * MINUTE]


def test_a_bad_backfill_overlap_is_refused_in_the_same_words(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = Client(target.storage)
        start = minute_job(client)
        words = "overlap must be one of allow, skip, buffer_one, not 'later'"
        with pytest.raises(InvalidJobError, match=words):
            client.recurring.backfill("m", utc(start), utc(start + MINUTE), overlap="later")
        url = ["--storage-url", target.url, "--prefix", target.prefix]
        command = ["recurring", "backfill", "m", "--from", utc(start).isoformat(),
                   "--to", utc(start + MINUTE).isoformat(), "--overlap", "later"]  # fmt: skip
        capsys.readouterr()
        assert main([*url, *command]) == 2
        assert words in capsys.readouterr().err
        assert fired_ticks(target.storage, "m") == []
