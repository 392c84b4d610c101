"""Liveness through the Celery entry points: a worker started with ``--parallel-scheduler`` and
``celery -A proj parallel-scheduler`` each register as a scheduler instance and heartbeat, and
each removes its record when stopped gracefully (the beat class: tests/scheduler/test_liveness.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from devtools.waiting import wait_until
from parallel_scheduler import __version__
from tests.celery_integration.celery_cluster import ROOT, Cluster

INTERVAL = 0.3


@pytest.mark.celery
@pytest.mark.redis
def test_the_worker_bootstep_and_the_celery_command_heartbeat(redis_cluster: Cluster) -> None:
    redis_cluster.env["PARALLEL_SCHEDULER_HEARTBEAT_INTERVAL"] = str(INTERVAL)
    storage = redis_cluster.storage
    # Given a worker running the scheduler, and the Celery command running another
    worker = redis_cluster.start_worker("--parallel-scheduler")
    log = (redis_cluster.tmp_path / "command.log").open("wb")
    command = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.celery_integration.plugin_celery_app",
         "parallel-scheduler"],
        cwd=ROOT, env=redis_cluster.env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        # Then both register, and their heartbeats move on
        pids = {worker.pid, command.pid}
        wait_until(lambda: {r.pid for r in storage.list_instances()} >= pids, timeout=60)
        first = {r.pid: r.heartbeat_at for r in storage.list_instances()}

        def both_beat_again() -> bool:
            now = {r.pid: r.heartbeat_at for r in storage.list_instances()}
            return all(now.get(pid, 0) > first[pid] for pid in pids)

        wait_until(both_beat_again, timeout=30)
        records = {r.pid: r for r in storage.list_instances()}
        assert all(r.version == __version__ for r in records.values())
        assert records[worker.pid].id.endswith(f":{worker.pid}")  # the worker's lock owner
        settings = json.loads(records[command.pid].details)["settings"]
        assert settings["heartbeat_interval"] == INTERVAL
        assert settings["prefix"] == redis_cluster.prefix
        # When both stop gracefully, then both records are gone
        for process in (worker, command):
            process.send_signal(signal.SIGTERM)
        for process in (worker, command):
            process.wait(timeout=60)
        assert storage.list_instances() == []
    finally:
        if command.poll() is None:
            command.kill()
            command.wait(timeout=10)
