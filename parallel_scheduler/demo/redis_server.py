"""The demo's own throwaway ``redis-server``: started and stopped by the demo, never another one.

It listens on a free loopback port, keeps nothing on disk (``--save "" --appendonly no``), runs
in the demo's folder, and is stopped by its own process id (the ``Popen`` the demo holds), so a
Redis the user runs elsewhere is never touched. Its pid goes to ``redis-server.pid`` in the
folder, so a test can check it is gone afterwards.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from parallel_scheduler.errors import ConfigurationError

__all__ = ["INSTALL_HINT", "PACKAGE_HINT", "installed", "missing", "throwaway_redis"]

BINARY = "redis-server"
INSTALL_HINT = "apt-get install redis-server"
PACKAGE_HINT = "pip install 'parallel-scheduler[redis]'"
_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0
_ATTEMPTS = 3  # a free port can be taken between choosing it and the server binding it


def installed() -> str | None:
    """The path of the ``redis-server`` binary, or ``None`` when it is not installed."""
    return shutil.which(BINARY)


def missing() -> str | None:
    """What to install before the demo can run on Redis, or ``None`` when nothing is missing:
    the ``redis-server`` binary, and the ``redis`` package (the optional [redis] extra, which
    the filesystem path does not need, so it is imported only here and once a server runs)."""
    if installed() is None:
        return f"no redis-server is installed ({INSTALL_HINT})"
    if importlib.util.find_spec("redis") is None:
        return f"the redis package is not installed ({PACKAGE_HINT})"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(binary: str, folder: Path, port: int) -> subprocess.Popen[bytes] | None:
    """The server on ``port``, answering PING; ``None`` when it exited (the port was taken)."""
    command = [
        binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir", str(folder), "--daemonize", "no", "--logfile", str(folder / "redis-server.log"),
    ]  # fmt: skip
    import redis

    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    probe = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + _START_TIMEOUT
    try:
        while server.poll() is None:
            try:
                if probe.ping():
                    return server
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"demo: redis-server did not answer on 127.0.0.1:{port} within "
                    f"{_START_TIMEOUT:.0f} s (see {folder / 'redis-server.log'})"
                )
            time.sleep(0.02)
    except BaseException:  # a timeout, or Ctrl-C while it starts: no server is left behind
        _stop(server)
        raise
    finally:
        probe.close()
    return None


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the demo's own server, by its pid; SIGKILL if it has not exited in time."""
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@contextmanager
def throwaway_redis(folder: Path) -> Iterator[str]:
    """A fresh ``redis-server`` for the ``with`` block; yields its URL (database 0)."""
    binary, problem = installed(), missing()
    if binary is None or problem is not None:
        raise ConfigurationError(f"demo: the Redis broker cannot run: {problem}")
    for _ in range(_ATTEMPTS):
        port = _free_port()
        server = _start(binary, folder, port)
        if server is not None:
            break
    else:
        raise ConfigurationError(
            f"demo: redis-server exited at start {_ATTEMPTS} times "
            f"(see {folder / 'redis-server.log'})"
        )
    (folder / "redis-server.pid").write_text(f"{server.pid}\n")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(server)
