"""``parallel-scheduler exporter``: the storage-side metrics served by a process of their own,
which keep telling the truth after the scheduler they watch has died (killed by its pid)."""

from __future__ import annotations

import re
import signal
import sys
import urllib.request
from pathlib import Path

import pytest

import storage_adapters
from devtools.processes import ChildProcess
from devtools.scheduler_process import SchedulerProcess
from devtools.waiting import wait_until
from parallel_scheduler import Client
from tests.conftest import SLOW_MACHINE_FACTOR, storage_url, unique_prefix
from tests.metrics_scrape import Samples, scrape

WAIT = 30 * SLOW_MACHINE_FACTOR  # each condition's deadline (the figures are cached for 5 s)


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get(("parallel_scheduler_" + name, tuple(sorted(labels.items()))))


@pytest.mark.parametrize(
    "kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
def test_the_exporter_reports_storage_after_the_scheduler_died(kind: str, tmp_path: Path) -> None:
    url, prefix = storage_url(kind, tmp_path), unique_prefix()
    storage = storage_adapters.from_url(url, prefix=prefix)
    storage.setup()
    client = Client(storage)
    scheduler = SchedulerProcess(
        tmp_path, "watched", url, [prefix], service=True,
        poll_interval=0.05, lock_lease=1, heartbeat_interval=0.2,
    )  # fmt: skip
    exporter = ChildProcess(
        tmp_path, "exporter",
        [sys.executable, "-m", "parallel_scheduler", "--storage-url", url, "--prefix", prefix,
         "exporter", "--port", "0"],
    )  # fmt: skip
    try:
        owner = scheduler.wait_ready()["owner"]
        found = wait_until(lambda: re.search(r"http://\S+/metrics", exporter.log()), WAIT)
        metrics_url = found.group(0)
        assert metrics_url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        # its own liveness probe answers apart from the metrics
        healthz = metrics_url.removesuffix("/metrics") + "/healthz"
        with urllib.request.urlopen(healthz, timeout=10) as answer:
            assert (answer.status, answer.read()) == (200, b"ok\n")

        # Given a live scheduler: healthy, its passes' ages shown
        def live() -> Samples | None:
            samples = scrape(metrics_url)
            seen = value(samples, "scheduler_last_pass_age_seconds", instance=owner, kind="delayed")
            return samples if value(samples, "healthy") == 1 and seen is not None else None

        samples = wait_until(live, WAIT, interval=0.2)
        assert value(samples, "schedulers", state="alive") == 1
        assert value(samples, "schedulers", state="dead") == 0
        assert value(samples, "storage_up") == 1
        assert value(samples, "health_problems", kind="no_live_scheduler") == 0
        assert ("process_cpu_seconds_total", ()) in samples  # the exporter's own process
        build = [key for key in samples if key[0] == "parallel_scheduler_build_info"]
        assert len(build) == 1 and build[0][1][0][0] == "version"
        assert not [key for key in samples if key[0].endswith("_created")]

        # When the scheduler is killed and jobs fall due on two queues and on none
        scheduler.send(signal.SIGKILL)
        scheduler.wait(WAIT)
        now = storage.now()
        for n in range(2):
            client.schedule("t.mail", eta=now - 10, job_id=f"mail-{n}", queue="emails")
        client.schedule("t.any", eta=now - 10, job_id="routed")
        client.schedule("t.later", countdown=3600, job_id="later", queue="emails")

        # Then the exporter says so, from storage
        def dead() -> Samples | None:
            samples = scrape(metrics_url)
            told = value(samples, "schedulers", state="dead") == 1
            counted = value(samples, "due_jobs") == value(samples, "due_jobs_by_queue_read") == 3
            return samples if told and counted else None

        samples = wait_until(dead, WAIT, interval=0.2)
        assert value(samples, "schedulers", state="alive") == 0
        assert value(samples, "healthy") == 0
        assert value(samples, "health_problems", kind="no_live_scheduler") == 1
        assert value(samples, "due_jobs_by_queue", queue="emails") == 2
        assert value(samples, "due_jobs_by_queue", queue="(none)") == 1
        assert value(samples, "due_jobs_by_queue_read") == 3
        assert value(samples, "jobs", state="scheduled") == 4
        assert (value(samples, "lag_seconds") or 0) >= 10
        age = value(samples, "scheduler_heartbeat_age_seconds", instance=owner, state="dead")
        assert age is not None and age > 0.6  # three of its 0.2 s intervals
        # a dead instance's passes are not reported as if it still ran them
        assert (
            value(samples, "scheduler_last_pass_age_seconds", instance=owner, kind="delayed")
            is None
        )
        # SIGTERM ends the exporter cleanly
        exporter.send(signal.SIGTERM)
        assert exporter.wait(WAIT) == 0
    finally:
        scheduler.end()
        exporter.end()
        if kind != "sqlite":
            storage.drop()
        storage.close()
