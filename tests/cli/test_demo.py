"""The demo a new user runs first: SQLite, a real Celery worker, every job executed once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.celery


def test_demo_runs_every_job_exactly_once(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", "demo",  # at the default log level, INFO
         "--jobs", "1000", "--spread", "2", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout
    assert re.search(r"executed\s+│\s+1,000", summary), summary
    assert re.search(r"lost\s+│\s+0\s", summary), summary
    assert re.search(r"duplicated\s+│\s+0\s", summary), summary
    # the settings it ran with, and the path the jobs actually took
    assert re.search(r"release mode\s+│\s+batch\s", summary), summary
    # fast publish is on by default, and the demo's filesystem broker has no fast path: send_task
    assert re.search(r"fast publish\s+│\s+on\s", summary), summary
    assert re.search(r"publisher\s+│\s+CeleryDispatcher, one job at a time", summary), summary
    assert re.search(r"publish path\s+│\s+send_task, claimed in batches \(1,000\)", summary)
    assert re.search(r"parallelism\s+│\s+4\s", summary), summary
    assert re.search(r"batch size\s+│\s+1,000\s", summary), summary
    # no per-pass INFO line went through the progress display
    assert " INFO " not in result.stdout + result.stderr, result.stdout + result.stderr
    executed = [line for p in tmp_path.glob("executed-*.log") for line in p.read_text().split()]
    assert len(executed) == len(set(executed)) == 1000
