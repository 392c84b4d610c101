"""``parallel-scheduler purge`` as an operator runs it, on a real SQLite store; and ``run
--retention`` reaching the scheduler, ``0`` included (0 keeps every job)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler.cli import main
from storage_adapters import JobState, NewJob, Storage, list_jobs


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'purge.db'}"


@pytest.fixture
def storage(url: str) -> Iterator[Storage]:
    store = storage_adapters.from_url(url)
    store.setup()
    yield store
    store.close()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def purge(url: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``parallel-scheduler --storage-url URL purge ARGS``: what every test here runs."""
    return run_cli(["--storage-url", url, "purge", *args], capsys)


def fill(storage: Storage) -> dict[str, list[str]]:
    """Five cancelled and three enqueued jobs finished a moment ago, and two still scheduled."""
    now = storage.now()
    ids = {"cancelled": [f"c{i}" for i in range(5)], "enqueued": ["e0", "e1", "e2"]}
    ids["scheduled"] = ["s0", "s1"]
    later = ids["cancelled"] + ids["scheduled"]
    storage.add_jobs([NewJob(id=i, task="t", payload="{}", due_at=now + 3600) for i in later])
    storage.add_jobs(
        [NewJob(id=i, task="t", payload="{}", due_at=now - 1) for i in ids["enqueued"]]
    )
    for job_id in ids["cancelled"]:
        assert storage.cancel(job_id)
    lock = storage.acquire_lock("delayed-scheduler", "cli-test", 30)
    assert lock is not None
    assert len(storage.mark_enqueued(storage.claim_due(10, lock, 30))) == 3
    storage.release_lock(lock)
    last = max(job.updated_at for job in list_jobs(storage, None, 100))
    wait_until(lambda: storage.now() > last + 0.2, timeout=10)
    return ids


def left(storage: Storage, ids: list[str]) -> list[str]:
    return [i for i in ids if storage.get_job(i) is not None]


def test_purge_deletes_the_finished_jobs_of_a_state_in_batches(
    url: str, storage: Storage, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given finished and scheduled jobs
    ids = fill(storage)
    # When the cancelled ones older than 0.1 s are purged, two per statement
    code, out, _ = purge(url, capsys, "--older-than", "0.1", "--state", "cancelled", "--batch", "2")
    # Then all five went, and nothing else
    assert code == 0
    assert out.splitlines() == [
        "cancelled: 5 deleted",
        "5 finished job(s) older than 0.1 s deleted",
    ]
    assert left(storage, ids["cancelled"]) == []
    assert left(storage, ids["enqueued"] + ids["scheduled"]) == ids["enqueued"] + ids["scheduled"]
    # And a purge of every finished state reports per state in JSON, scheduled jobs untouched
    code, out, _ = purge(url, capsys, "--older-than", "0.1", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["deleted"] == {"enqueued": 3, "cancelled": 0, "expired": 0}
    assert report["total"] == 3
    assert storage.count_by_state()[JobState.SCHEDULED] == 2
    assert sum(storage.count_by_state().values()) == 2


def test_jobs_finished_within_older_than_stay(
    url: str, storage: Storage, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = fill(storage)
    code, out, _ = purge(url, capsys, "--older-than", "3600")
    assert code == 0 and out.splitlines()[-1].startswith("0 finished job(s)")
    assert left(storage, ids["cancelled"]) == ids["cancelled"]


@pytest.mark.parametrize("state", ["scheduled", "claimed", "running"])
def test_purging_an_unfinished_state_is_refused_in_one_line(
    url: str, storage: Storage, capsys: pytest.CaptureFixture[str], state: str
) -> None:
    # Given finished jobs
    ids = fill(storage)
    # When a purge names a state that is not finished
    code, out, err = purge(
        url, capsys, "--older-than", "0", "--state", "enqueued", "--state", state
    )
    # Then it is refused with one line naming it, and nothing was deleted
    assert code == 2 and out == ""
    assert err.splitlines() == [err.strip()] and err.startswith("parallel-scheduler: error: ")
    assert state in err
    assert left(storage, ids["enqueued"]) == ids["enqueued"]


def test_purge_defaults_to_the_retention_setting(
    url: str, storage: Storage, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = fill(storage)
    # Given a retention of 0: keep everything, so purge needs to be told what to delete
    monkeypatch.setenv("PARALLEL_SCHEDULER_RETENTION", "0")
    code, _, err = purge(url, capsys)
    assert code == 2 and "--older-than" in err
    assert left(storage, ids["cancelled"]) == ids["cancelled"]
    # Given a retention of 0.1 s, purge deletes what finished before it
    monkeypatch.setenv("PARALLEL_SCHEDULER_RETENTION", "0.1")
    code, out, _ = purge(url, capsys, "--json")
    assert code == 0 and json.loads(out)["total"] == 8
    assert sum(storage.count_by_state().values()) == 2


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("3600", 3600.0)])
def test_run_retention_reaches_the_scheduler(
    url: str, capsys: pytest.CaptureFixture[str], text: str, value: float
) -> None:
    code, out, err = run_cli(
        ["--storage-url", url, "run", "--once", "--retention", text, "--broker-url", "memory://"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["settings"]["retention"] == value


@pytest.mark.parametrize("text", ["-1", "nan", "inf"])
def test_a_bad_retention_is_refused_by_name(
    url: str, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    code, _, err = run_cli(
        ["--storage-url", url, "run", "--once", f"--retention={text}", "--broker-url", "memory://"],
        capsys,
    )
    assert code == 2 and "retention" in err
