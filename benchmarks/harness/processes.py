"""Child processes of a benchmark: started with their output in a log, waited for with a
deadline, and ended by their own pid (SIGTERM, then SIGKILL), never by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BENCHMARKS",
    "ready_count",
    "start_process",
    "stop_process",
    "wait_for",
    "wait_until",
    "worker_environment",
]

#: the benchmarks folder: the working directory and import root of every worker we start
BENCHMARKS = Path(__file__).resolve().parent.parent


def worker_environment(**values: str) -> dict[str, str]:
    """This environment minus PARALLEL_SCHEDULER_* settings (which would override the benchmark's
    own configuration in the child), plus ``values``, with the benchmarks folder importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARALLEL_SCHEDULER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(BENCHMARKS), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.update(values)
    return env


def start_process(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=BENCHMARKS, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Warm shutdown by our own pid (SIGTERM), then SIGKILL if it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def _exited(process: Any) -> bool:
    """A ``subprocess.Popen`` or a ``multiprocessing.Process`` that has ended."""
    if hasattr(process, "poll"):
        return process.poll() is not None
    return not process.is_alive()


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float, processes: Sequence[Any] = ()
) -> float:
    """Poll ``condition`` until it holds (returns the seconds it took); fail early when one of our
    processes died, and with ``what`` named when ``timeout`` passes."""
    began = time.monotonic()
    while not condition():
        for process in processes:
            if _exited(process):
                raise RuntimeError(f"{what}: a process we started exited ({process})")
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - began


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> float | None:
    """Seconds until ``condition`` held, or ``None`` (with a warning naming ``what``) when it
    did not within ``timeout``: a scenario that never settles is a result worth reporting."""
    try:
        return wait_until(condition, what, timeout)
    except RuntimeError as exc:
        print(f"{Path(sys.argv[0]).stem}: {exc}", file=sys.stderr)
        return None


def ready_count(folder: Path) -> int:
    """Workers that announced readiness (``celery_apps.announce_ready``) in ``folder``."""
    return len(list(folder.glob("ready-*")))
