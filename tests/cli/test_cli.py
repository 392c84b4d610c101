"""The ``parallel-scheduler`` command as a user runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import DelayedJobScheduler, JobState
from parallel_scheduler.cli import main
from tests.conftest import REDIS_URL, require_server


@pytest.fixture
def store(tmp_path: Path) -> list[str]:
    return ["--storage-url", f"sqlite:///{tmp_path / 'cli.db'}"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_schedule_list_status_cancel(store: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        [*store, "schedule", "tasks.add", "--args", "[1, 2]", "--countdown", "60", "--id", "j1"],
        capsys,
    )
    assert code == 0 and "j1 scheduled" in out
    code, out, _ = run_cli([*store, "schedule", "tasks.add", "--id", "j1"], capsys)
    assert code == 0 and "already exists" in out
    code, out, _ = run_cli([*store, "list", "--json"], capsys)
    (job,) = json.loads(out)
    assert (job["id"], job["args"], job["state"]) == ("j1", [1, 2], "scheduled")
    code, out, _ = run_cli([*store, "status", "--json"], capsys)
    report = json.loads(out)
    assert report["counts"]["scheduled"] == 1
    assert report["lock_holder"] is None
    assert report["next_due_in_seconds"] > 50
    assert run_cli([*store, "cancel", "j1"], capsys)[0] == 0
    code, out, _ = run_cli([*store, "cancel", "j1"], capsys)
    assert code == 1 and "not cancelled" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--storage-url", "mongodb://h/db", "status"], "unknown storage URL scheme 'mongodb'"),
        (["--storage-url", "nonsense", "status"], "malformed storage URL"),
        (["--prefix", "x;drop", "status"], "invalid prefix"),
    ],
)
def test_bad_configuration_is_one_clear_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert message in err


def test_credentials_never_reach_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/none"
    code, out, err = run_cli(["--storage-url", url, "status"], capsys)
    assert code == 2
    assert "hunter2" not in out + err
    assert "app:***@" in err


def test_bad_arguments_are_refused_by_the_parser(store: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*store, "schedule", "t", "--countdown", "nan"])
    assert exit_info.value.code == 2


@pytest.mark.redis
def test_run_releases_into_the_broker_and_stops_on_sigterm(tmp_path: Path) -> None:
    require_server("redis")
    url = f"sqlite:///{tmp_path / 'run.db'}"
    queue = f"ps-cli-{uuid.uuid4().hex[:8]}"
    cli = [sys.executable, "-m", "parallel_scheduler", "--storage-url", url]
    subprocess.run([*cli, "schedule", "tasks.x", "--id", "cli-job", "--queue", queue], check=True)
    broker = redis.Redis.from_url(REDIS_URL)
    process = subprocess.Popen(
        [*cli, "run", "--broker-url", REDIS_URL, "--poll-interval", "0.1"],
        stderr=subprocess.PIPE,
    )
    storage = storage_adapters.from_url(url)
    try:
        # The job reaches the broker queue with its id as the task id
        raw = wait_until(lambda: broker.lindex(queue, 0), timeout=30)
        assert json.loads(raw)["headers"]["id"] == "cli-job"
        job = wait_until(
            lambda: (r := storage.get_job("cli-job")) and r.state is JobState.ENQUEUED and r, 30
        )
        assert job.attempts == 1
        # SIGTERM: finishes, releases the lock, exits 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert storage.lock_holder(DelayedJobScheduler.LOCK_NAME) is None
    finally:
        if process.poll() is None:
            process.kill()
        broker.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        storage.close()


def test_run_reads_the_celery_apps_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a Celery app whose config sets a bad batch size for parallel-scheduler
    (tmp_path / "proj_conf.py").write_text(
        "from celery import Celery\n"
        "app = Celery('proj', broker='memory://')\n"
        "app.conf.parallel_scheduler_batch_size = -3\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # When the scheduler starts with that app, Then it refuses, naming the setting
    args = ["--storage-url", f"sqlite:///{tmp_path / 'x.db'}", "run", "--app", "proj_conf:app"]
    code, _, err = run_cli([*args, "--once"], capsys)
    assert code == 2
    assert "batch_size must be an integer" in err
