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
        [sys.executable, "-m", "parallel_scheduler", "--log-level", "WARNING", "demo",
         "--jobs", "1000", "--spread", "2", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout
    assert re.search(r"executed\s+│\s+1,000", summary), summary
    assert re.search(r"lost\s+│\s+0\s", summary), summary
    assert re.search(r"duplicated\s+│\s+0\s", summary), summary
    executed = [line for p in tmp_path.glob("executed-*.log") for line in p.read_text().split()]
    assert len(executed) == len(set(executed)) == 1000
