"""A throwaway RabbitMQ node with its own epmd, ports, config and data, stoppable by pid.

RabbitMQ's default distribution port is the AMQP port + 20000 (past 65535 for 55672), so it is
set; a private epmd keeps the node out of the machine's Erlang cluster, and runs in the
foreground (no ``-daemon``) so its pid is ours to stop as well.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from devtools.server_base import MissingBinaryError, Server, free_port, port_free

__all__ = ["RabbitMQServer"]


def _script() -> str | None:
    """The server start script itself: Debian's /usr/sbin wrapper insists on root or the rabbitmq
    user and, for root, re-runs it through ``su``, whose pid is not the server's."""
    debian = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
    return str(debian) if debian.exists() else shutil.which("rabbitmq-server")


class RabbitMQServer(Server):
    name = "rabbitmq"

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        dist_port: int | None = None,
        epmd_port: int | None = None,
        node: str = "ps-test@localhost",
    ) -> None:
        script, epmd = _script(), shutil.which("epmd")
        if script is None or epmd is None:
            raise MissingBinaryError(
                "starting a throwaway RabbitMQ needs rabbitmq-server and epmd: install them with "
                "`apt-get install -y rabbitmq-server` (Debian/Ubuntu) or put them on PATH"
            )
        self.script, self.epmd = script, epmd
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(workdir, port)
        self.dist_port = dist_port or free_port()
        self.epmd_port = epmd_port or free_port()
        self.node = node
        self._epmd: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def _command(self) -> list[str]:
        # Without -detached the script stays in the foreground and turns SIGTERM into a clean stop.
        return [self.script]

    def _environment(self) -> dict[str, str]:
        """Own config, env and plugin files, so /etc/rabbitmq (which may pin the listener to 5672)
        is never read; own HOME, so the Erlang cookie is created here, not in the user's home."""
        folder = self.workdir
        config = folder / "rabbitmq.conf"
        config.write_text(f"listeners.tcp.1 = 127.0.0.1:{self.port}\n")
        (folder / "rabbitmq-env.conf").write_text("")
        (folder / "enabled_plugins").write_text("[].\n")
        return dict(
            os.environ,
            HOME=str(folder),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONFIG_FILE=str(config),
            RABBITMQ_CONF_ENV_FILE=str(folder / "rabbitmq-env.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(folder / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(folder / "mnesia"),
            RABBITMQ_LOG_BASE=str(folder / "log"),
            RABBITMQ_PID_FILE=str(folder / "rabbitmq.pid"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
        )

    def _popen_options(self) -> dict[str, Any]:
        return {"env": self._environment(), "cwd": self.workdir}

    def start(self) -> float:
        """epmd first (until it listens), then the node."""
        if self._epmd is None or self._epmd.poll() is not None:
            self._epmd = subprocess.Popen(
                [self.epmd, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
                env=self._environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while port_free(self.epmd_port):
                if time.monotonic() > deadline:
                    raise TimeoutError("the throwaway RabbitMQ's epmd did not listen within 60 s")
                time.sleep(0.2)
        return super().start()

    def answers(self) -> bool:
        from kombu.connection import Connection

        try:
            with Connection(self.url, connect_timeout=3) as connection:  # type: ignore[no-untyped-call]
                connection.ensure_connection(max_retries=1)
        except Exception:  # kombu raises transport-specific errors; any of them means "no broker"
            return False
        return True

    def _graceful_stop(self, save: bool) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGTERM)

    def pids(self) -> list[int]:
        """epmd, then the node: a later ``stop_pids`` ends the node before its epmd."""
        return ([] if self._epmd is None else [self._epmd.pid]) + super().pids()

    def close(self) -> None:
        super().close()
        if self._epmd is not None and self._epmd.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._epmd.terminate()
            self._epmd.wait(timeout=30)
