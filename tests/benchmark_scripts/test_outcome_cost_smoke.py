"""Smoke test of ``benchmarks/outcome_cost.py`` (what recording execution outcomes costs a
worker per task): at a tiny size, against the real servers, both modes run and pass their
checks (every job released once; with recording on each job's outcome stored once, none
dropped; with it off, none), and the JSON records the figures, the commit and the load average.
The figures themselves are not asserted: at this size they mean nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.benchmark_scripts.smoke import assert_never_overwrites, assert_succeeded, run_benchmark
from tests.conftest import REDIS_URL, require_server


def _outcome_cost(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    urls = ["--broker-url", REDIS_URL, "--storage-url", REDIS_URL]
    return run_benchmark("outcome_cost", *urls, *args, timeout=timeout)


@pytest.mark.slow
@pytest.mark.celery
@pytest.mark.redis
def test_both_modes_run_checked_and_measured(tmp_path: Path) -> None:
    require_server("redis")
    out = tmp_path / "outcome-cost.json"
    done = _outcome_cost(
        "--jobs", "40", "--repetitions", "1", "--timeout", "120",
        "--workdir", str(tmp_path), "--out", str(out),
    )  # fmt: skip
    assert_succeeded(done)
    document = json.loads(out.read_text())
    assert document["passed"]
    runs = {run["mode"]: run for run in document["runs"]}
    assert set(runs) == {"off", "on"}
    assert runs["on"]["outcomes_recorded"] == 40 and runs["off"]["outcomes_recorded"] == 0
    assert all(run["enqueued"] == 40 and run["us_per_task"] > 0 for run in runs.values())
    assert set(document["figures"]["median_us_per_task"]) == {"off", "on"}
    assert document["environment"]["git_commit"]
    assert len(document["environment"]["load_average_at_end"]) == 3
    assert "µs per task" in done.stdout


def test_an_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    assert_never_overwrites(_outcome_cost, tmp_path)
