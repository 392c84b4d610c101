"""Liveness against real storage: scheduler processes register and heartbeat, ``status`` lists
them alive or dead with the locks they hold, a killed one turns dead after three intervals, a
stopped one removes itself, a dead one is removed after the retention window, storage errors in a
heartbeat never stop it, and a stored password never reaches the record.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

import storage_adapters
from devtools.processes import ChildProcess
from devtools.scheduler_process import run_command
from devtools.waiting import wait_until
from parallel_scheduler import Client, Settings, __version__
from parallel_scheduler.celery.beat import DurableScheduler
from parallel_scheduler.cli import main
from parallel_scheduler.process import liveness as instances_module
from parallel_scheduler.process.liveness import DEAD_AFTER_INTERVALS, Heartbeat
from storage_adapters import InstanceRecord, Storage
from tests.conftest import ADAPTERS, POSTGRESQL_URL, storage_url, unique_prefix

INTERVAL = 0.3
PASSWORD = "liveness-s3cret"
LOCKS = {"delayed": "delayed-scheduler", "recurring": "recurring-scheduler"}


@dataclass
class Store:
    url: str
    prefix: str
    storage: Storage


def with_password(url: str) -> str:
    """PostgreSQL here trusts local connections, so any password is accepted (and must never be
    shown)."""
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = storage_url(str(request.param), tmp_path)
    if url == POSTGRESQL_URL:
        url = with_password(url)
    prefix = unique_prefix()
    storage = storage_adapters.from_url(url, prefix=prefix)
    storage.setup()
    yield Store(url, prefix, storage)
    storage.drop()
    storage.close()


def status(store: Store, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    args = ["--log-level", "WARNING", "--storage-url", store.url, "--prefix", store.prefix]
    assert main([*args, "status", "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def spawn_run(store: Store, tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PARALLEL_SCHEDULER_STORAGE_URL": store.url,
        "PARALLEL_SCHEDULER_PREFIX": store.prefix,
        "PARALLEL_SCHEDULER_HEARTBEAT_INTERVAL": str(INTERVAL),
        "PARALLEL_SCHEDULER_POLL_INTERVAL": "0.1",
        "PARALLEL_SCHEDULER_LOCK_LEASE": "2",
    }
    return ChildProcess(tmp_path, name, run_command(broker_url="memory://"), env).process


def by_pid(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {view["pid"]: view for view in report["schedulers"]}


def one_active_per_lock(report: dict[str, Any]) -> bool:
    alive = [view for view in report["schedulers"] if view["alive"]]
    for kind, lock in LOCKS.items():
        assert sum(lock in view["locks"] for view in alive) <= 1, report
        if sum(kind in view["active_for"] for view in alive) != 1:
            return False
    return True


def test_processes_show_alive_then_killed_dead_then_stopped_gone(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two real `parallel-scheduler run` processes on one store, and a recurring job firing
    # every second: an instance is active for a lock once it held it (peeking does not count).
    # Its firings are jittered, so most are due after the step that creates them and are
    # released by the delayed scheduler (one due at once may be sent by the firing step itself).
    Client(store.storage, retry_for=5).recurring.save(
        "tick", "tasks.tick", "* * * * * *", misfire_policy="skip", jitter=0.9
    )
    first, second = spawn_run(store, tmp_path, "first"), spawn_run(store, tmp_path, "second")
    try:

        def both_alive_and_settled() -> dict[str, Any] | None:
            report = status(store, capsys)
            views = by_pid(report)
            alive = {first.pid, second.pid} <= {p for p, v in views.items() if v["alive"]}
            return report if alive and one_active_per_lock(report) else None

        # Then status lists both alive, each kind with exactly one active instance
        report = wait_until(both_alive_and_settled, timeout=60, interval=0.1)
        views = by_pid(report)
        for process in (first, second):
            view = views[process.pid]
            assert view["version"] == __version__
            assert view["host"] and view["problem"] is None
            assert view["heartbeat_age_seconds"] <= DEAD_AFTER_INTERVALS * INTERVAL
            assert view["settings"]["heartbeat_interval"] == INTERVAL
            assert view["settings"]["prefix"] == store.prefix
        # and the stored records hold the settings with the password masked
        records = store.storage.list_instances()
        assert len(records) == 2
        assert all(PASSWORD not in record.details for record in records)
        if PASSWORD in store.url:
            shown = {view["settings"]["storage_url"] for view in report["schedulers"]}
            assert shown == {store.url.replace(PASSWORD, "***")}

        # and the active one's last delayed pass says when it ended, how long it took, and
        # what it released
        def delayed_pass_of_the_active() -> dict[str, Any] | None:
            views = status(store, capsys)["schedulers"]
            active = [v for v in views if "delayed" in v["active_for"]]
            return active[0]["last_pass"]["delayed"] if active else None

        last = wait_until(delayed_pass_of_the_active, timeout=30, interval=0.1)
        # (a pass that finds nothing due is idle: it peeked and took no lock)
        assert (last["lock_acquired"] or last["idle"]) and last["released"] >= 0
        assert last["at"] > 0 and last["duration_seconds"] >= 0

        # When one is killed outright
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)

        # Then within a few intervals it shows dead, its heartbeat more than 3 intervals old,
        # and the survivor is the active one for both kinds
        def first_dead_second_active() -> dict[str, Any] | None:
            report = status(store, capsys)
            views = by_pid(report)
            dead, live = views.get(first.pid), views.get(second.pid)
            if dead is None or live is None or dead["alive"] or not live["alive"]:
                return None
            return report if sorted(live["active_for"]) == ["delayed", "recurring"] else None

        report = wait_until(first_dead_second_active, timeout=60, interval=0.1)
        dead = by_pid(report)[first.pid]
        assert dead["heartbeat_age_seconds"] > DEAD_AFTER_INTERVALS * INTERVAL
        assert dead["active_for"] == []

        # When the other stops gracefully
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0
        # Then its record is gone; the dead one's stays until the retention window passes
        assert [r.pid for r in store.storage.list_instances()] == [first.pid]
        text_args = ["--storage-url", store.url, "--prefix", store.prefix, "status"]
        assert main(["--log-level", "WARNING", *text_args]) == 0
        out = capsys.readouterr().out
        assert "schedulers: 0 alive, 1 dead" in out
        assert PASSWORD not in out
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def test_a_live_heartbeat_removes_records_dead_past_the_window(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a record that stopped beating, and a live instance with a 1 s removal window
    monkeypatch.setattr(instances_module, "REMOVE_AFTER", 1.0)
    store.storage.register_instance(InstanceRecord("gone:1", "h", 1, "0", 1.0, 0.0, "{}"))
    beat = Heartbeat(store.storage, "live:1", Settings(heartbeat_interval=0.1), {})
    beat.start()
    try:
        # Then the live one's heartbeats delete it once it is older than the window
        wait_until(lambda: [r.id for r in store.storage.list_instances()] == ["live:1"], 10)
        (live,) = store.storage.list_instances()
        assert json.loads(live.details)["settings"]["heartbeat_interval"] == 0.1
    finally:
        beat.stop()
    # and a graceful stop removes the live one too
    assert store.storage.list_instances() == []


def test_storage_errors_in_a_heartbeat_never_stop_it(tmp_path: Path) -> None:
    # Given a heartbeat over a store whose schema is not set up yet: every write fails
    url = f"sqlite:///{tmp_path / 'late.db'}"
    storage = storage_adapters.from_url(url, prefix=unique_prefix())
    beat = Heartbeat(storage, "patient:1", Settings(heartbeat_interval=0.05), {})
    beat.start()
    try:
        assert beat.last_beat is None
        assert not beat.beat()
        # When storage becomes usable, then the same thread registers on its next interval
        storage.setup()
        wait_until(lambda: [r.id for r in storage.list_instances()] == ["patient:1"], 10)
        wait_until(lambda: beat.last_beat is not None, 10)
    finally:
        beat.stop()
        storage.close()


def test_a_malformed_record_is_shown_flagged(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.storage.register_instance(InstanceRecord("odd:1", "h", 7, "9", 1.0, 0.0, "{not json"))
    store.storage.register_instance(InstanceRecord("list:1", "h", 8, "9", 1.0, 0.0, "[1]"))
    report = status(store, capsys)
    views = {view["id"]: view for view in report["schedulers"]}
    assert "details are not JSON" in views["odd:1"]["problem"]
    assert "not a JSON object" in views["list:1"]["problem"]
    assert views["odd:1"]["alive"]  # its heartbeat is fresh: only its details are unreadable
    assert main(["--storage-url", store.url, "--prefix", store.prefix, "status"]) == 0
    assert "details are not JSON" in capsys.readouterr().out


def test_the_beat_scheduler_heartbeats_and_removes_itself(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # Given Celery beat's scheduler class on an app configured for this store
    app = Celery("liveness_beat", broker="memory://")
    app.conf.parallel_scheduler_storage_url = store.url
    app.conf.parallel_scheduler_prefix = store.prefix
    app.conf.parallel_scheduler_heartbeat_interval = INTERVAL
    caplog.set_level(logging.INFO, logger="parallel_scheduler.process.startup")
    beat = DurableScheduler(app, lazy=False)
    try:
        # Then it logged the one start-up line, naming its instance id (its lock owner)
        starts = [r for r in caplog.records if r.name == "parallel_scheduler.process.startup"]
        assert len(starts) == 1 and "starting: instance" in starts[0].getMessage()
        # Then it registered as a scheduler instance, and keeps beating
        (record,) = store.storage.list_instances()
        assert record.pid == os.getpid()
        first = record.heartbeat_at
        wait_until(lambda: store.storage.list_instances()[0].heartbeat_at > first, 10)
    finally:
        beat.close()
    assert store.storage.list_instances() == []


def test_status_upgrades_a_store_from_before_liveness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a store set up by the release before the instances table, never upgraded
    from storage_adapters.sql import tables as sql_tables

    url, prefix = f"sqlite:///{tmp_path / 'old.db'}", unique_prefix()
    old = storage_adapters.from_url(url, prefix=prefix)
    step = next(m.version for m in sql_tables.MIGRATIONS if "instances" in m.description)
    with monkeypatch.context() as released:
        released.setattr(sql_tables, "MIGRATIONS", sql_tables.MIGRATIONS[: step - 1])
        old.setup()
    # When status runs on it, then it answers, with no schedulers and nothing flagged
    report = status(Store(url, prefix, old), capsys)
    assert (report["schedulers"], report["problem"]) == ([], None)
    assert old.list_instances() == []  # the table exists now
    old.close()
