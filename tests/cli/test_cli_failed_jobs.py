"""Jobs set aside as failed through the command line, on every backend: ``list --state failed``
lists them with their last error, ``show`` and ``status`` read them (one whose stored arguments
do not even decode included), and ``reschedule`` queues one again with its attempts reset."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from parallel_scheduler.cli import main
from storage_adapters import JobState, NewJob, Storage
from tests.conftest import set_up_storage, storage_url

TOO_DEEP = '{"args":[' + "[" * 100_000 + "]" * 100_000 + '],"kwargs":{},"options":{}}'
REASON = "cannot be sent: its stored arguments do not decode (RecursionError)"


@pytest.fixture
def store(adapter_kind: str, tmp_path: Path) -> Iterator[tuple[list[str], Storage]]:
    """A store holding one failed poison job and one scheduled job; the CLI arguments to it."""
    url = storage_url(adapter_kind, tmp_path)
    prefix, storage = set_up_storage(url)
    now = storage.now()
    storage.add_jobs(
        [
            NewJob("poison", "t.x", TOO_DEEP, now - 1),
            NewJob("fine", "t.x", '{"args":[],"kwargs":{},"options":{}}', now + 600),
        ]
    )
    lock = storage.acquire_lock("cli-test", "tester", 30)
    assert lock is not None
    claim = storage.claim("poison", lock, 30)
    assert claim is not None and storage.fail([claim], REASON) == ["poison"]
    try:
        yield ["--log-level", "WARNING", "--storage-url", url, "--prefix", prefix], storage
    finally:
        storage.drop()
        storage.close()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_list_show_and_status_read_a_failed_job(
    store: tuple[list[str], Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = store
    code, out, err = run_cli([*base, "list", "--state", "failed", "--json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [(row["id"], row["state"], row["last_error"]) for row in rows] == [
        ("poison", "failed", REASON)
    ]
    code, out, err = run_cli([*base, "list"], capsys)
    assert code == 0, err
    assert "poison" in out and "fine" in out
    code, out, err = run_cli([*base, "show", "poison"], capsys)
    assert code == 0, err
    assert "failed" in out and REASON in out
    code, out, err = run_cli([*base, "status", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["counts"]["failed"] == 1


def test_reschedule_queues_a_failed_job_again(
    store: tuple[list[str], Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    base, storage = store
    code, out, err = run_cli([*base, "reschedule", "poison", "--countdown", "0"], capsys)
    assert code == 0, err
    assert "poison rescheduled" in out
    record = storage.get_job("poison")
    assert record is not None and record.state is JobState.SCHEDULED and record.attempts == 0
    code, out, err = run_cli([*base, "list", "--state", "failed", "--json"], capsys)
    assert code == 0 and json.loads(out) == []
    # A job that is neither scheduled nor failed is refused, saying what it is
    storage.cancel("fine")
    code, _, err = run_cli([*base, "reschedule", "fine", "--countdown", "0"], capsys)
    assert code == 1 and "it is cancelled, not scheduled or failed" in err
