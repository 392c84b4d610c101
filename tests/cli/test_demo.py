"""The demo a new user runs first: a real Celery worker, every job executed once.

By default (``--broker auto``) it runs on a throwaway ``redis-server`` of its own as broker and
storage, and shows the default fast path (the one-script release); ``--broker filesystem`` (and
any machine without ``redis-server``) runs on SQLite and a filesystem broker and says why that
is not the fast path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI

pytestmark = pytest.mark.celery


def _demo(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", "demo",  # at the default log level, INFO
         "--jobs", "1000", "--spread", "2", "--workdir", str(tmp_path), *options],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def _flat(summary: str) -> str:
    """The summary's words in order, table rules left out: a row's value wrapped over several
    lines reads as one line (the first column is blank on the lines a value continues on)."""
    return " ".join(summary.replace("│", " ").split())


def _executed_once_each(tmp_path: Path, jobs: int) -> None:
    executed = [line for p in tmp_path.glob("executed-*.log") for line in p.read_text().split()]
    assert len(executed) == len(set(executed)) == jobs


def _shows(summary: str, *rows: str) -> None:
    """Each of ``rows`` (a regular expression: a label, its column rule, a value) is in the
    summary."""
    for row in rows:
        assert re.search(row, summary), f"no row {row!r} in:\n{summary}"


def _every_job_ran_once(
    result: subprocess.CompletedProcess[str], parallelism: str, batch_size: str
) -> str:
    """The summary of a demo that succeeded: its 1,000 jobs ran, none lost or run twice, and the
    settings it ran with, batch release and fast publish (the defaults) at ``parallelism`` and
    ``batch_size``."""
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout
    _shows(
        summary,
        r"executed\s+│\s+1,000",
        r"lost\s+│\s+0\s",
        r"duplicated\s+│\s+0\s",
        r"release mode\s+│\s+batch\s",
        r"fast publish\s+│\s+on\s",
        rf"parallelism\s+│\s+{parallelism}\s",
        rf"batch size\s+│\s+{batch_size}\s",
    )
    return summary


def test_demo_on_the_filesystem_broker_runs_every_job_exactly_once(tmp_path: Path) -> None:
    result = _demo(tmp_path, "--broker", "filesystem")
    summary = _every_job_ran_once(result, parallelism="4", batch_size="1,000")
    # the path the jobs actually took: fast publish is on by default, and the demo's filesystem
    # broker has no fast path: send_task
    _shows(
        summary,
        r"publisher\s+│\s+CeleryDispatcher, one job at a time",
        r"publish path\s+│\s+send_task, claimed in batches \(1,000\)",
    )
    # one row says why this is not the fast path, and what to do for it
    flat = _flat(summary)
    assert "not the fast path --broker filesystem: the filesystem broker has no fast path " in flat
    assert "apt-get install redis-server" in flat, summary
    # no per-pass INFO line went through the progress display
    assert " INFO " not in result.stdout + result.stderr, result.stdout + result.stderr
    # the summary ends with where to go next: the dashboard, status, the plugin quick start
    tail = summary[summary.index("next steps:") :]
    assert "parallel-scheduler --storage-url URL dashboard" in tail, summary
    assert "pip install 'parallel-scheduler[dashboard]'" in " ".join(tail.split()), summary
    assert (
        "http://127.0.0.1:8080/" in tail and "parallel-scheduler --storage-url URL status" in tail
    )
    assert "Quick start for Celery users: the plugin" in tail, summary
    _executed_once_each(tmp_path, 1000)
    assert not (tmp_path / "redis-server.pid").exists(), "the filesystem path starts no Redis"


def _require_redis_server() -> None:
    if shutil.which("redis-server") is not None:
        return
    problem = "no redis-server binary on PATH: apt-get install redis-server"
    if IN_CI:
        pytest.fail(f"{problem}; CI=true forbids skipping the demo's default (Redis) path")
    pytest.skip(problem)


def _gone(pid: int, port: str) -> bool:
    """The demo's server is gone: no such process, or its pid now belongs to something else
    (redis-server titles itself ``redis-server 127.0.0.1:<port>``)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return True
    return b"redis-server" not in command or port.encode() not in command


def test_demo_by_default_shows_the_one_script_fast_path_on_its_own_redis(tmp_path: Path) -> None:
    _require_redis_server()
    # non-default settings, so the test also shows the demo's options take effect
    result = _demo(tmp_path, "--max-degree-of-parallelism", "3", "--batch-size", "500")
    summary = _every_job_ran_once(result, parallelism="3", batch_size="500")
    flat = _flat(summary)
    # storage on the broker's Redis server: every job released by the one script
    _shows(
        summary,
        r"publish path\s+│\s+one script, storage to broker \(1,000\)",
        r"publisher\s+│\s+RedisPublisher lists, one script per",
    )
    assert "not the fast path" not in flat, summary
    match = re.search(r"redis://127\.0\.0\.1:(\d+)/0", flat)
    assert match, summary
    assert match.group(1) != "6379", "the demo must start its own Redis, not use another"
    assert " INFO " not in result.stdout + result.stderr, result.stdout + result.stderr
    _executed_once_each(tmp_path, 1000)
    # the demo's own redis-server is gone: its process, and anything on its port
    pid = int((tmp_path / "redis-server.pid").read_text())
    assert pid != os.getpid()
    assert _gone(pid, match.group(1)), f"the demo's redis-server (pid {pid}) still runs"


def _without_redis_server() -> dict[str, str]:
    """The environment with a PATH of the Python interpreter's folder only: no redis-server."""
    folder = Path(sys.executable).parent
    assert not (folder / "redis-server").exists()
    return dict(os.environ, PATH=str(folder))


def test_demo_without_redis_server_runs_on_the_filesystem_and_says_what_to_install(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", "demo", "--jobs", "20", "--spread", "0.2",
         "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=_without_redis_server(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    flat = _flat(result.stdout)
    assert (
        "not the fast path no redis-server is installed (apt-get install redis-server), "
        "so the filesystem broker has no fast path" in flat
    ), result.stdout
    assert re.search(r"publish path\s+│\s+send_task, claimed in batches \(20\)", result.stdout)
    assert not (tmp_path / "redis-server.pid").exists()


def test_demo_broker_redis_without_redis_server_says_what_to_install(tmp_path: Path) -> None:
    env = _without_redis_server()
    result = subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", "demo", "--broker", "redis",
         "--jobs", "10", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "apt-get install redis-server" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
