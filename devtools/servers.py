"""The one launcher of throwaway servers: PostgreSQL and Redis that a benchmark, a fault test or
``python -m devtools.services`` may start, stop (``stop``), SIGKILL (``kill``), SIGSTOP/SIGCONT
(``pause``/``resume``) and ``restart``; RabbitMQ lives in ``rabbitmq.py``, re-exported here.

A restart keeps the port and the data directory. PostgreSQL is crash-safe on its own (``kill``
then ``start`` runs crash recovery). Redis runs with ``--save "" --appendonly no``: ``stop()``
saves the dataset with ``SHUTDOWN SAVE`` first, as an operator's restart of a persistent Redis
would, and ``start()`` loads it again; ``kill()`` (or ``stop(save=False)``) loses it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from devtools.rabbitmq import RabbitMQServer
from devtools.server_base import (
    MissingBinaryError,
    Server,
    find_binary,
    free_port,
    new_workdir,
    port_free,
    stop_pids,
)

__all__ = [
    "MissingBinaryError",
    "PostgresServer",
    "RabbitMQServer",
    "RedisServer",
    "Server",
    "free_port",
    "new_workdir",
    "port_free",
    "stop_pids",
]


class RedisServer(Server):
    name = "redis"

    def __init__(self, workdir: Path, port: int | None = None, *, label: str = "redis") -> None:
        self.name = label
        self.binary = find_binary("redis-server", "redis-server")
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
        self.initdb = find_binary("initdb", "postgresql")
        self.postgres = find_binary("postgres", "postgresql")
        self.as_root = os.geteuid() == 0
        if self.as_root and shutil.which("runuser") is None:
            raise MissingBinaryError(
                "running as root needs `runuser` (util-linux) to start PostgreSQL "
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
