"""What the benchmark smoke tests share: running a benchmark command at a tiny size from the
repository's root, and the run's refusal to overwrite a result someone kept."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Held while a benchmark runs, so two workers of the suite never run two at once.
LOCK_FILE = Path(tempfile.gettempdir()) / "parallel-scheduler-benchmark-smoke.lock"


def run_benchmark(module: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.<module> <args>`` from the root (benchmarks is a package), its
    output captured; a failure is the caller's to judge. One at a time across the suite's
    workers: the benchmarks share the broker's ``celery`` list on the test Redis server."""
    with open(LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [sys.executable, "-m", f"benchmarks.{module}", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def assert_succeeded(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-4000:]


def assert_never_overwrites(
    run: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """``run("--out", <a file that exists>, timeout=60)`` refuses with exit status 2, saying
    so, and leaves the file as it was."""
    out = tmp_path / "kept.json"
    out.write_text("{}")
    done = run("--out", str(out), timeout=60)
    assert done.returncode == 2 and "never overwrites" in done.stderr
    assert out.read_text() == "{}"
