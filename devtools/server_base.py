"""A throwaway server's life cycle, whatever the server: ``servers.py`` has PostgreSQL and Redis,
``rabbitmq.py`` RabbitMQ, each from the installed binaries.

Each server runs from the installed binaries on a free loopback port with its data in a temporary
directory of its own (or on the port a caller passes), so nothing here can touch the machine's
shared servers. Every signal goes to a process id this module started (or a descendant of one,
looked up by pid), never by name.

A restart keeps the port and the data directory. PostgreSQL is crash-safe on its own (``kill``
then ``start`` runs crash recovery). Redis runs with ``--save "" --appendonly no``: ``stop()``
saves the dataset with ``SHUTDOWN SAVE`` first, as an operator's restart of a persistent Redis
would, and ``start()`` loads it again; ``kill()`` (or ``stop(save=False)``) loses it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO, Any

import psutil

__all__ = [
    "MissingBinaryError",
    "Server",
    "find_binary",
    "free_port",
    "new_workdir",
    "port_free",
    "stop_pids",
]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class MissingBinaryError(RuntimeError):
    """A server binary is not installed; the message says what to install."""


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    """Nothing answers on this loopback port."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class Server(ABC):
    """One server process: ``start``, ``stop``, ``kill``, ``pause``/``resume``, ``restart``."""

    name: str

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.log_path = workdir / f"{self.name}.log"

    # -- what each server supplies --------------------------------------------------------

    @property
    @abstractmethod
    def url(self) -> str:
        """A client URL for this server."""

    @abstractmethod
    def _command(self) -> list[str]:
        """The command line that runs the server in the foreground."""

    @abstractmethod
    def answers(self) -> bool:
        """True when the server accepts a client request."""

    def server_pid(self) -> int:
        """The pid of the server process proper (not a wrapper such as ``runuser``)."""
        if self._process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._process.pid

    @abstractmethod
    def _graceful_stop(self, save: bool) -> None:
        """Ask the server to shut down; ``stop`` waits for it."""

    def _popen_options(self) -> dict[str, Any]:
        """Extra ``Popen`` arguments (an environment, a working directory) a server needs."""
        return {}

    # -- life cycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> float:
        """Start on the same port and data directory; returns the seconds it took to answer."""
        if self.running:
            raise RuntimeError(f"{self.name} on port {self.port} is already running")
        started = time.monotonic()
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self._command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            **self._popen_options(),
            # a Ctrl-C in the caller's terminal is not a fault we inject; and a server started by
            # ``python -m devtools.services start`` outlives that command
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self.answers():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited at start-up (status {self._process.returncode}); "
                    f"its log ends with:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"{self.name} did not answer within {START_TIMEOUT} s")
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self, *, save: bool = True) -> None:
        """Graceful shutdown, waiting until every server process has exited."""
        if not self.running:
            return
        processes = self._tree()
        self._graceful_stop(save)
        try:
            self._wait_gone(processes, STOP_TIMEOUT)
        except TimeoutError:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the server and every process it started (by pid), and wait until all are gone."""
        if self._process is None:
            return
        processes = self._tree()
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGCONT)  # a frozen process dies only once resumed
                process.send_signal(signal.SIGKILL)
        self._wait_gone(processes, STOP_TIMEOUT)

    def pause(self) -> None:
        """SIGSTOP the server and its children: connections stay open but nothing answers."""
        for process in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        for process in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGCONT)

    def pids(self) -> list[int]:
        """The processes to record for a later ``stop`` by pid, oldest first."""
        return [] if self._process is None else [self._process.pid]

    def restart(self, *, save: bool = True) -> float:
        """Stop, then start on the same port and data; returns the seconds it was unreachable."""
        began = time.monotonic()
        self.stop(save=save)
        self.start()
        return time.monotonic() - began

    def close(self) -> None:
        """End the server (any state) and remove its files."""
        if self._process is not None:
            if self.running:
                self.resume()
                self.stop(save=False)
            self.kill()
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, characters: int = 3000) -> str:
        if self._log is not None:
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except OSError:
            return ""

    # -- plumbing ---------------------------------------------------------------------------

    def _tree(self) -> list[psutil.Process]:
        """Our Popen process and all its descendants (the server proper may be a grandchild)."""
        if self._process is None:
            return []
        try:
            root = psutil.Process(self._process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _wait_gone(self, processes: list[psutil.Process], timeout: float) -> None:
        _, alive = psutil.wait_procs(processes, timeout=timeout)
        if alive:
            raise TimeoutError(f"{self.name} processes {[p.pid for p in alive]} still running")
        if self._process is not None:
            self._process.wait(timeout=timeout)
        if self._log is not None:
            self._log.close()
            self._log = None


def find_binary(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
        found = str(candidates[-1]) if candidates else None
    if found is None:
        raise MissingBinaryError(
            f"starting a throwaway {package} server needs its `{name}` binary: "
            f"install it with `apt-get install -y {package}` (Debian/Ubuntu) or put it on PATH"
        )
    return found


def new_workdir(label: str, prefix: str = "ps-faults") -> Path:
    """A fresh temporary directory for one server (``<prefix>-<label>-...``)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{label}-"))


def stop_pids(pids: list[int], timeout: float = 60.0) -> None:
    """SIGTERM each recorded pid, newest first, and wait until all are gone: how a later process
    (``python -m devtools.services stop``) ends servers an earlier one started."""
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
