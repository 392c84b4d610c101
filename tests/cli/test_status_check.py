"""``parallel-scheduler status --check``: exit 0 healthy, 1 with one line per problem, 2 on
error; ``--max-lag``; the plain ``status`` saying a next due time in the past is overdue.

"No live scheduler while jobs are due" is made the real way: a scheduler process
(``devtools/scheduler_process.py``, the product's ``SchedulerService``) is killed by its pid.
A lock held by a dead instance is a liveness record whose heartbeat stopped while its lock is
still held (what a process whose heartbeat thread is stuck while its lock thread renews leaves).
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage_adapters
from devtools.scheduler_process import SchedulerProcess
from devtools.waiting import wait_until
from parallel_scheduler import Client
from parallel_scheduler.cli import main
from storage_adapters import InstanceRecord, JobState, Storage
from tests.conftest import SLOW_MACHINE_FACTOR, unique_prefix
from tests.loopback import CountingListener

WAIT = 30 * SLOW_MACHINE_FACTOR  # a deadline for conditions, never a sleep


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, str, Storage]]:
    url, prefix = f"sqlite:///{tmp_path / 'check.db'}", unique_prefix()
    storage = storage_adapters.from_url(url, prefix=prefix)
    storage.setup()
    yield url, prefix, storage
    storage.close()


def check(
    store: tuple[str, str, Storage], capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, list[str]]:
    url, prefix, _ = store
    code = main(["--storage-url", url, "--prefix", prefix, "status", *args])
    out = capsys.readouterr().out
    return code, out.splitlines()


def test_nothing_due_and_no_scheduler_is_healthy(
    store: tuple[str, str, Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    Client(store[2]).schedule("t.later", countdown=3600)
    assert check(store, capsys, "--check") == (0, ["healthy"])


def test_a_killed_scheduler_with_jobs_due_is_unhealthy(
    store: tuple[str, str, Storage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, prefix, storage = store
    client = Client(storage)
    scheduler = SchedulerProcess(
        tmp_path, "checked", url, [prefix], service=True,
        poll_interval=0.05, lock_lease=1, heartbeat_interval=0.2,
    )  # fmt: skip
    try:
        scheduler.wait_ready()
        # Given a live scheduler that releases what falls due: healthy
        client.schedule("t.first", job_id="first")
        wait_until(lambda: getattr(client.get("first"), "state", None) == JobState.ENQUEUED, WAIT)
        assert check(store, capsys, "--check") == (0, ["healthy"])
        # When it is killed and a job falls due
        scheduler.send(signal.SIGKILL)
        scheduler.wait(WAIT)
        client.schedule("t.second", eta=storage.now() - 5, job_id="second")

        # Then, once its heartbeat is three intervals old, the check says so and exits 1
        def unhealthy() -> list[str] | None:
            code, lines = check(store, capsys, "--check")
            return lines if code == 1 else None

        lines = wait_until(unhealthy, WAIT, interval=0.1)
        assert len(lines) == 1, lines
        assert lines[0].startswith("unhealthy: no live scheduler while jobs are due (lag ")
        assert lines[0].endswith("(1 dead instance(s) on record)")
        # --json gives the same problems, and the same exit status
        code = main(["--storage-url", url, "--prefix", prefix, "status", "--check", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 1
        assert [p["kind"] for p in report["problems"]] == ["no_live_scheduler"]
        assert report["schedulers"][0]["alive"] is False
        # The plain status says how late the next due job is, and what is wrong
        code, lines = check(store, capsys)
        assert code == 0  # only --check judges with its exit status
        (due,) = [line for line in lines if line.startswith("next due: ")]
        assert " (overdue by " in due and due.endswith(" s)")
        assert any(line.startswith("unhealthy: no live scheduler") for line in lines)
    finally:
        scheduler.end()


def test_max_lag(
    store: tuple[str, str, Storage],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = store[2]
    Client(storage).schedule("t.late", eta=storage.now() - 30)
    # Lag 30 s: allowed by a minute, the default, and by an hour
    for allowed in ([], ["--max-lag", "3600"]):
        code, lines = check(store, capsys, "--check", *allowed)
        assert code == 1 and len(lines) == 1 and "no live scheduler" in lines[0], lines
    # Refused by 10 s, from the option or from the lag_alert setting
    code, lines = check(store, capsys, "--check", "--max-lag", "10")
    assert code == 1 and len(lines) == 2, lines
    assert re.fullmatch(
        r"unhealthy: lag \d+ s is above 10 s: the earliest due job is waiting", lines[1]
    )
    monkeypatch.setenv("PARALLEL_SCHEDULER_LAG_ALERT", "10")
    code, lines = check(store, capsys, "--check")
    assert code == 1 and len(lines) == 2 and " is above 10 s: " in lines[1], lines
    # A bad value is bad input: exit 2 before anything is read
    with pytest.raises(SystemExit) as refused:
        check(store, capsys, "--check", "--max-lag", "soon")
    assert refused.value.code == 2
    assert "'soon' is not a number of seconds" in capsys.readouterr().err


def test_a_lock_held_by_a_dead_instance_past_its_lease(
    store: tuple[str, str, Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    storage = store[2]
    # Given an instance that beat every 0.05 s with a 0.2 s lease, whose heartbeat stopped
    # while its lock stays held
    details = {"settings": {"heartbeat_interval": 0.05, "lock_lease": 0.2}}
    storage.register_instance(
        InstanceRecord("zombie-1", "host-z", 4242, "0.0", time.time(), 0.0, json.dumps(details))
    )
    assert storage.acquire_lock("delayed-scheduler", "zombie-1", 300) is not None

    # Then once it is dead for longer than its lease, the check names it
    def unhealthy() -> list[str] | None:
        code, lines = check(store, capsys, "--check")
        return lines if code == 1 else None

    (line,) = wait_until(unhealthy, WAIT, interval=0.1)
    assert line.startswith(
        "unhealthy: lock delayed-scheduler is held by dead instance zombie-1 (last heartbeat "
    )
    assert line.endswith("ago, past its 0.2 s lease)")


def test_an_overdue_recurring_job(
    store: tuple[str, str, Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    storage = store[2]
    Client(storage).recurring.save("hourly", "t.tick", "0 * * * *")
    assert storage.set_recurring_enabled("hourly", True, storage.now() - 600)
    code, lines = check(store, capsys, "--check")
    assert code == 1
    assert lines[0].startswith("unhealthy: no live scheduler while recurring runs are due")
    assert lines[1].startswith("unhealthy: recurring job(s) overdue by more than 60 s: hourly by ")
    # Within a grace of an hour it is only due, not overdue
    code, lines = check(store, capsys, "--check", "--max-lag", "3600")
    assert code == 1 and len(lines) == 1 and "no live scheduler" in lines[0]
    code, lines = check(store, capsys)
    assert any(line.startswith("next recurring run: ") and "overdue by" in line for line in lines)


def test_storage_unreachable_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with CountingListener("reset") as nobody:
        url = f"redis://127.0.0.1:{nobody.port}/0"
        code = main(["--storage-url", url, "status", "--check"])
    assert code == 2
    err = capsys.readouterr().err
    assert "parallel-scheduler: error: " in err
    assert nobody.connections >= 1
