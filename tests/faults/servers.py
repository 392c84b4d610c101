"""Throwaway PostgreSQL and Redis servers that a fault test may stop, kill, freeze and restart.

Each server runs from the installed binaries on a free loopback port with its data in a temporary
directory of its own, so nothing here can touch the machine's shared servers. Every signal goes
to a process id this module started (or a descendant of one, looked up by pid), never by name.

A restart keeps the port and the data directory. PostgreSQL is crash-safe on its own (``kill``
then ``start`` runs crash recovery). Redis runs with ``--save "" --appendonly no``: ``stop()``
saves the dataset with ``SHUTDOWN SAVE`` first, as an operator's restart of a persistent Redis
would, and ``start()`` loads it again; ``kill()`` (or ``stop(save=False)``) loses it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO

import psutil

__all__ = ["MissingBinaryError", "PostgresServer", "RedisServer", "Server", "free_port"]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class MissingBinaryError(RuntimeError):
    """A server binary is not installed; the message says what to install."""


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

    @abstractmethod
    def server_pid(self) -> int:
        """The pid of the server process proper (not a wrapper such as ``runuser``)."""

    @abstractmethod
    def _graceful_stop(self, save: bool) -> None:
        """Ask the server to shut down; ``stop`` waits for it."""

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
            start_new_session=True,  # a Ctrl-C in the test's terminal is not the fault we inject
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


def _binary(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
        found = str(candidates[-1]) if candidates else None
    if found is None:
        raise MissingBinaryError(
            f"the fault tests start their own {package} server and need its `{name}` binary: "
            f"install it with `apt-get install -y {package}` (Debian/Ubuntu) or put it on PATH"
        )
    return found


class RedisServer(Server):
    name = "redis"

    def __init__(self, workdir: Path, port: int | None = None, *, label: str = "redis") -> None:
        self.name = label
        self.binary = _binary("redis-server", "redis-server")
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(workdir, port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def url_for_db(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _command(self) -> list[str]:
        return [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
            "--dbfilename", "dump.rdb", "--protected-mode", "no",
        ]  # fmt: skip

    def answers(self) -> bool:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        try:
            client = redis.Redis(
                port=self.port,
                socket_connect_timeout=0.5,
                socket_timeout=2,
                retry=Retry(NoBackoff(), 0),
            )
            # LOADING (reading the dump after a restart) raises until the dataset is in memory.
            return bool(client.ping())
        except redis.RedisError:
            return False

    def server_pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._process.pid

    def _graceful_stop(self, save: bool) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No retries: the server closing the connection as it exits is the success case.
        client = redis.Redis(
            port=self.port, socket_connect_timeout=2, socket_timeout=10, retry=Retry(NoBackoff(), 0)
        )
        try:
            client.shutdown(save=save, nosave=not save)
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits
        except redis.RedisError:
            if self._process is not None:
                self._process.send_signal(signal.SIGTERM)


class PostgresServer(Server):
    name = "postgresql"

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.initdb = _binary("initdb", "postgresql")
        self.postgres = _binary("postgres", "postgresql")
        self.as_root = os.geteuid() == 0
        if self.as_root and shutil.which("runuser") is None:
            raise MissingBinaryError(
                "running the fault tests as root needs `runuser` (util-linux) to start PostgreSQL "
                "as the postgres user: `apt-get install -y util-linux`"
            )
        if self.as_root:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise MissingBinaryError(
                    "running as root, PostgreSQL must run as the `postgres` user, which does not "
                    "exist: `apt-get install -y postgresql` creates it"
                ) from None
            workdir.mkdir(parents=True, exist_ok=True)
            os.chown(workdir, account.pw_uid, account.pw_gid)
        super().__init__(workdir, port)
        self.data = workdir / "data"
        self._initdb()

    def _as_postgres(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if self.as_root else command

    def _initdb(self) -> None:
        result = subprocess.run(
            self._as_postgres(
                [self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                 "--no-sync", "--no-instructions"]
            ),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}): {result.stderr[-2000:]}")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _command(self) -> list[str]:
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.data),
            # fsync=off is safe against a killed server (its writes sit in the OS page cache),
            # not against a lost machine. synchronous_commit stays on: off, a commit is
            # acknowledged before its WAL leaves shared memory, so SIGKILL would undo
            # acknowledged writes and the crash test would measure that, not the scheduler.
            "fsync": "off",
            "max_connections": "200",
            "logging_collector": "off",
        }
        options = [part for key, value in settings.items() for part in ("-c", f"{key}={value}")]
        return self._as_postgres(
            [self.postgres, "-D", str(self.data), "-p", str(self.port), *options]
        )

    def answers(self) -> bool:
        import psycopg

        try:
            dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def server_pid(self) -> int:
        """The postmaster, from ``postmaster.pid``, checked to be one of our processes."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        if pid not in {p.pid for p in self._tree()}:
            raise RuntimeError(f"postmaster.pid names {pid}, which this server did not start")
        return pid

    def _graceful_stop(self, save: bool) -> None:
        # SIGINT is PostgreSQL's "fast" shutdown: open transactions are rolled back, clients are
        # disconnected, the data is checkpointed. (SIGTERM would wait for every client to leave.)
        os.kill(self.server_pid(), signal.SIGINT)


def new_workdir(label: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"ps-faults-{label}-"))
