"""Child processes of a test or a benchmark: started from the repository root with their output
in a log file, waited for with a deadline, and signalled only by their own pid, never by name.

``ChildProcess`` is a started command with its log; ``stop`` ends it warmly (SIGTERM, then
SIGKILL once the deadline passes), ``end`` makes sure it is gone whatever a test did to it
(SIGCONT first, so a frozen process can die). ``start_process`` and ``stop_process`` do the same
for a bare ``subprocess.Popen``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

__all__ = [
    "ROOT",
    "ChildProcess",
    "clean_environment",
    "start_process",
    "stop_process",
]

#: the repository root: the working directory (so the import root) of every child started here
ROOT = Path(__file__).resolve().parent.parent


def clean_environment(**values: str) -> dict[str, str]:
    """This environment minus PARALLEL_SCHEDULER_* settings (which would override a child's own
    configuration), plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARALLEL_SCHEDULER_")}
    env.update(values)
    return env


def start_process(
    command: list[str], env: dict[str, str] | None, log: Path, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """``command`` in ``cwd``, its stdout and stderr in ``log`` (replaced), no stdin."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    """Warm shutdown by its own pid (SIGTERM), then SIGKILL if it does not end within
    ``timeout``; returns its exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=30)


class ChildProcess:
    """A process a test or benchmark started (output in ``<workdir>/<name>.log``), signalled
    only by its own pid."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self.process = start_process(command, env, self.log_path, cwd)
        self.pid = self.process.pid

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} pid {self.pid}>"

    def send(self, signum: int) -> None:
        """A signal to this process, by its pid; nothing else is ever signalled."""
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def poll(self) -> int | None:
        return self.process.poll()

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, SIGKILL if it has not ended within ``timeout``; its exit status."""
        return stop_process(self.process, timeout)

    def end(self, grace: float = 0.0) -> None:
        """Teardown: make sure the process is gone, whatever the test did to it (SIGCONT; with
        ``grace``, SIGTERM and that long to end; then SIGKILL)."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        if grace:
            stop_process(self.process, grace)
        else:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
