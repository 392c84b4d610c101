"""``parallel-scheduler show`` with execution outcomes, on every backend: the job's timeline
(created, sent, then what the worker recorded: received, started, failed, with who, how long and
why), in text and in ``--json``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from parallel_scheduler.cli import main
from storage_adapters import NewJob, OutcomeEvent, OutcomeState, Storage
from tests.conftest import set_up_storage, storage_url

S = OutcomeState


@pytest.fixture
def store(adapter_kind: str, tmp_path: Path) -> Iterator[tuple[list[str], Storage]]:
    """A store holding one released job whose run failed on a worker; the CLI arguments to it."""
    url = storage_url(adapter_kind, tmp_path)
    prefix, storage = set_up_storage(url)
    now = storage.now()
    storage.add_jobs([NewJob("sent-1", "t.x", '{"args":[],"kwargs":{},"options":{}}', now - 1)])
    lock = storage.acquire_lock("cli-test", "tester", 30)
    assert lock is not None
    claims = storage.claim_due(10, lock, 30)
    assert storage.mark_enqueued(claims) == ["sent-1"]
    storage.record_outcomes(
        [
            OutcomeEvent("sent-1", "t.x", S.RECEIVED, now + 1, "w1@box"),
            OutcomeEvent("sent-1", "t.x", S.STARTED, now + 2, "w1@box"),
            OutcomeEvent("sent-1", "t.x", S.FAILED, now + 3, "w1@box", 1.0, "KeyError: 'k'"),
        ]
    )
    try:
        yield ["--log-level", "WARNING", "--storage-url", url, "--prefix", prefix], storage
    finally:
        storage.drop()
        storage.close()


def test_show_prints_the_timeline_in_text_and_json(
    store: tuple[list[str], Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = store
    assert main([*base, "show", "sent-1", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    timeline = view["timeline"]
    assert [entry["state"] for entry in timeline] == [
        "created",
        "sent",
        "received",
        "started",
        "failed",
    ]
    assert timeline[-1]["worker"] == "w1@box"
    assert timeline[-1]["runtime"] == 1.0
    assert timeline[-1]["error"] == "KeyError: 'k'"
    assert timeline[-1]["at"].endswith("+00:00")
    assert main([*base, "show", "sent-1"]) == 0
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if line.startswith("timeline ")]
    assert len(lines) == 5
    assert lines[1].endswith("  sent")
    assert lines[-1].endswith("  failed on w1@box in 1.000 s (KeyError: 'k')")
