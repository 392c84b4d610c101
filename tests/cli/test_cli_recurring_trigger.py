"""``recurring trigger ID`` counts as a run: ``recurring list`` then shows it as the last run and
as a recent firing marked as a trigger, on every backend, and the next run stays where it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

import storage_adapters
from parallel_scheduler.cli import main
from tests.conftest import storage_url, unique_prefix


@pytest.fixture
def cli(adapter_kind: str, tmp_path: Path) -> Iterator[list[str]]:
    """The CLI arguments that reach a fresh store of ``adapter_kind``; dropped afterwards."""
    url = storage_url(adapter_kind, tmp_path)
    prefix = unique_prefix()
    args = ["--log-level", "WARNING", "--storage-url", url, "--prefix", prefix]
    try:
        yield args
    finally:
        storage = storage_adapters.from_url(url, prefix=prefix)
        storage.drop()
        storage.close()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def listed(cli: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    (row,) = json.loads(run_cli([*cli, "recurring", "list", "--json"], capsys))
    assert isinstance(row, dict)
    return row


def test_a_trigger_shows_as_the_last_run_and_a_recent_firing(
    cli: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an hourly recurring job that never ran
    run_cli([*cli, "recurring", "add", "hourly", "tasks.report", "--every", "3600"], capsys)
    before = listed(cli, capsys)
    assert (before["last_run_at"], before["recent_firings"]) == (None, [])
    # When it is triggered
    out = run_cli([*cli, "recurring", "trigger", "hourly"], capsys)
    job_id = out.split()[-1]
    assert job_id.startswith("hourly@trigger-")
    # Then the listing shows the trigger as its last run and newest firing, marked as a trigger
    after = listed(cli, capsys)
    at = job_id.removeprefix("hourly@trigger-").replace("Z", "+00:00")
    assert after["recent_firings"] == [
        {"job_id": job_id, "at": datetime.fromisoformat(at).isoformat(), "trigger": True}
    ]
    assert after["last_run_at"] == datetime.fromisoformat(at).isoformat()
    # And the schedule did not move
    assert after["next_run_at"] == before["next_run_at"]
    # And the text listing says so too
    header, row = (
        line.split("\t") for line in run_cli([*cli, "recurring", "list"], capsys).splitlines()
    )
    shown = dict(zip(header, row, strict=True))
    assert shown["last run"] == after["last_run_at"]
    assert shown["recent firings"] == f"{job_id} (triggered)"
