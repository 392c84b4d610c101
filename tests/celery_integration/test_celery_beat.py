"""The beat replacement: beat_schedule synced into recurring jobs by a documented rule, and
several ``celery beat -S …DurableScheduler`` processes firing each tick exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from celery.schedules import BaseSchedule, crontab

from devtools.waiting import wait_until
from parallel_scheduler import Client, ConfigurationError
from parallel_scheduler.celery.beat_sync import sync_beat_schedule
from storage_adapters import Storage
from tests.celery_integration.celery_cluster import ROOT, Cluster, broker_url


def app_with(schedule: dict[str, dict[str, object]], zone: str = "Europe/Berlin") -> Celery:
    app = Celery("beat-sync", broker="memory://")
    app.conf.timezone = zone
    app.conf.beat_schedule = schedule
    return app


ENTRIES: dict[str, dict[str, object]] = {
    "office hours": {
        "task": "reports.tick",
        "schedule": crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"),
        "args": (1,),
        "options": {"queue": "reports"},
    },
    "every 30 s": {"task": "health.ping", "schedule": timedelta(seconds=30)},
    "every 45 s": {"task": "health.pong", "schedule": 45.0, "kwargs": {"x": 1}},
}


def test_entries_become_recurring_jobs(storage: Storage) -> None:
    client = Client(storage)
    report = sync_beat_schedule(app_with(ENTRIES), client.recurring)
    assert sorted(report.saved) == ["beat-every_30_s", "beat-every_45_s", "beat-office_hours"]
    office = client.recurring.get("beat-office_hours")
    assert office is not None
    assert (office.schedule.cron, office.schedule.timezone) == (
        "*/15 9-17 * * mon-fri",
        "Europe/Berlin",
    )
    assert (office.task, office.args, office.options) == ("reports.tick", [1], {"queue": "reports"})
    every = client.recurring.get("beat-every_45_s")
    assert every is not None and every.schedule.every == 45.0 and every.kwargs == {"x": 1}


def test_a_resync_leaves_unchanged_entries_alone_and_removes_dropped_ones(storage: Storage) -> None:
    client = Client(storage)
    client.recurring.save("made-by-api", "tasks.keep", "0 * * * *")
    sync_beat_schedule(app_with(ENTRIES), client.recurring)
    before = client.recurring.get("beat-every_30_s")
    # When beat_schedule loses one entry and changes another
    changed = {k: v for k, v in ENTRIES.items() if k != "every 45 s"}
    changed["every 30 s"] = {"task": "health.ping", "schedule": timedelta(seconds=30)}
    changed["office hours"] = {**ENTRIES["office hours"], "args": (2,)}
    report = sync_beat_schedule(app_with(changed), client.recurring)
    # Then: unchanged left alone (same next run), changed saved, dropped removed, API job kept
    assert report.unchanged == ["beat-every_30_s"]
    assert report.saved == ["beat-office_hours"]
    assert report.removed == ["beat-every_45_s"]
    assert client.recurring.get("beat-every_30_s") == before
    assert client.recurring.get("made-by-api") is not None


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"custom": {"task": "t", "schedule": BaseSchedule()}}, "not supported"),
        ({"a b": {"task": "t", "schedule": 60}, "a_b": {"task": "t", "schedule": 60}}, "both map"),
    ],
)
def test_unsupported_entries_are_refused_by_name(
    storage: Storage, entries: dict[str, dict[str, object]], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        sync_beat_schedule(app_with(entries), Client(storage).recurring)


@pytest.mark.celery
@pytest.mark.redis
def test_two_beats_fire_each_tick_exactly_once(tmp_path: Path) -> None:
    cluster = Cluster(broker_url("redis"), tmp_path)
    cluster.env["PS_BEAT_EVERY"] = "1"
    beats: list[subprocess.Popen[bytes]] = []
    try:
        # Given a worker, and two beat processes with the durable scheduler on the same schedule
        cluster.start_worker()
        cluster.wait_ready(1)
        for n in range(2):
            command = [
                sys.executable, "-m", "celery", "-A", "tests.celery_integration.plugin_celery_app",
                "beat",
                "-S", "parallel_scheduler.celery.beat:DurableScheduler", "--loglevel=INFO",
                f"--schedule={tmp_path / f'beat-{n}'}", "--pidfile=",
            ]  # fmt: skip
            log = (tmp_path / f"beat-{n}.log").open("wb")
            beats.append(
                subprocess.Popen(command, cwd=ROOT, env=cluster.env, stdout=log, stderr=log)
            )
        # When the every-second entry has fired several times
        wait_until(lambda: len(cluster.executions()) >= 5, timeout=60)
    finally:
        for beat in beats:
            beat.send_signal(signal.SIGTERM)
        for beat in beats:
            beat.wait(timeout=30)
        runs = cluster.executions()
        cluster.close()
    # Then each tick ran once: distinct ids of the form beat-<name>@<tick>, no repeats
    ids = Counter(r["id"] for r in runs)
    assert max(ids.values()) == 1
    assert all(i.startswith("beat-tick_every_second@") for i in ids)
    assert all(r["args"] == ["beat"] for r in runs)
