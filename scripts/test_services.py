"""Make sure the servers the tests need are reachable, starting throwaway ones if they are not.

``start`` prints ``export NAME=URL`` lines for the shell to evaluate: the machine's own servers when
they answer, otherwise servers started here from the installed binaries, on their own ports and
data directories, which ``stop`` ends again (by the process ids recorded at start, nothing else).
When neither works it says exactly what to run, and fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

STATE = Path(os.environ.get("PARALLEL_SCHEDULER_SERVICES_DIR", "/tmp/parallel-scheduler-services"))
PIDS = STATE / "pids"

POSTGRESQL_ENV = "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL"
REDIS_ENV = "PARALLEL_SCHEDULER_TEST_REDIS_URL"
RABBITMQ_ENV = "PARALLEL_SCHEDULER_TEST_RABBITMQ_URL"
POSTGRESQL_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS_DEFAULT = "redis://127.0.0.1:6379/0"
RABBITMQ_DEFAULT = "amqp://guest:guest@127.0.0.1:5672//"
THROWAWAY_PG_PORT = 55432
THROWAWAY_REDIS_PORT = 56379
THROWAWAY_RABBITMQ_PORT = 55672
# RabbitMQ's default distribution port is the AMQP port + 20000, past 65535 for 55672; and a
# private epmd keeps the throwaway node out of the machine's Erlang cluster and stoppable by pid.
THROWAWAY_RABBITMQ_DIST_PORT = 55673
THROWAWAY_EPMD_PORT = 54369
THROWAWAY_RABBITMQ_NODE = "ps-test@localhost"


def _fail(message: str) -> NoReturn:
    print(f"test services: {message}", file=sys.stderr)
    sys.exit(1)


def _postgresql_answers(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url.replace("+psycopg", ""), connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=3).ping())
    except redis.RedisError:
        return False


def _rabbitmq_answers(url: str) -> bool:
    from kombu.connection import Connection

    try:
        with Connection(url, connect_timeout=3) as connection:  # type: ignore[no-untyped-call]
            connection.ensure_connection(max_retries=1)
    except Exception:  # kombu raises transport-specific errors; any of them means "no broker"
        return False
    return True


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _record(pid: int) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with PIDS.open("a") as f:
        f.write(f"{pid}\n")


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():
        if time.monotonic() > deadline:
            _fail(f"{what} did not answer within 60 s")
        time.sleep(0.2)


def start_redis() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        _fail(
            "Redis is not reachable at 127.0.0.1:6379 and redis-server is not installed. Run "
            "`apt-get install -y redis-server` (or start your own Redis and set "
            f"{REDIS_ENV}=redis://host:port/0), then run `make test` again."
        )
    port = THROWAWAY_REDIS_PORT
    url = f"redis://127.0.0.1:{port}/0"
    if not _port_free(port):
        if _redis_answers(url):
            return url
        _fail(f"port {port} is taken by something else")
    folder = STATE / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(folder), "--logfile", str(folder / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    _record(process.pid)
    _wait(lambda: _redis_answers(url), "the throwaway Redis")
    return url


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


def _as_postgres_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        _fail("running as root needs `runuser` to start PostgreSQL as the postgres user")
    return ["runuser", "-u", "postgres", "--", *command]


def start_postgresql() -> str:
    initdb, postgres = _pg_binary("initdb"), _pg_binary("postgres")
    if initdb is None or postgres is None:
        _fail(
            "PostgreSQL is not reachable at 127.0.0.1:5432 and its server binaries are not "
            "installed. Run `apt-get install -y postgresql` (or start your own server and set "
            f"{POSTGRESQL_ENV}=postgresql://user@host:port/db), then run `make test` again."
        )
    port = THROWAWAY_PG_PORT
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    if not _port_free(port):
        if _postgresql_answers(url):
            return url
        _fail(f"port {port} is taken by something else")
    data = STATE / "postgresql"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(STATE, "postgres")
        shutil.chown(data, "postgres")
    subprocess.run(
        _as_postgres_user([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]),
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    process = subprocess.Popen(
        _as_postgres_user([postgres, "-D", str(data), "-p", str(port), "-k", str(data),
                           "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    _record(process.pid)
    _wait(lambda: _postgresql_answers(url), "the throwaway PostgreSQL")
    return url


def _rabbitmq_script() -> str | None:
    """The server start script itself: Debian's /usr/sbin wrapper insists on root or the rabbitmq
    user and, for root, re-runs it through ``su``, whose pid is not the server's."""
    debian = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
    return str(debian) if debian.exists() else shutil.which("rabbitmq-server")


def _rabbitmq_environment(folder: Path) -> dict[str, str]:
    """An environment that keeps the throwaway node off the machine's RabbitMQ files and ports.

    Own config, env and plugin files, so /etc/rabbitmq (which may pin the listener to 5672) is
    never read; own HOME, so the Erlang cookie is created here, not in the user's home.
    """
    config = folder / "rabbitmq.conf"
    config.write_text(f"listeners.tcp.1 = 127.0.0.1:{THROWAWAY_RABBITMQ_PORT}\n")
    (folder / "rabbitmq-env.conf").write_text("")
    (folder / "enabled_plugins").write_text("[].\n")
    return dict(
        os.environ,
        HOME=str(folder),
        RABBITMQ_NODENAME=THROWAWAY_RABBITMQ_NODE,
        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
        RABBITMQ_NODE_PORT=str(THROWAWAY_RABBITMQ_PORT),
        RABBITMQ_DIST_PORT=str(THROWAWAY_RABBITMQ_DIST_PORT),
        RABBITMQ_CONFIG_FILE=str(config),
        RABBITMQ_CONF_ENV_FILE=str(folder / "rabbitmq-env.conf"),
        RABBITMQ_ENABLED_PLUGINS_FILE=str(folder / "enabled_plugins"),
        RABBITMQ_MNESIA_BASE=str(folder / "mnesia"),
        RABBITMQ_LOG_BASE=str(folder / "log"),
        RABBITMQ_PID_FILE=str(folder / "rabbitmq.pid"),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        ERL_EPMD_PORT=str(THROWAWAY_EPMD_PORT),
        ERL_EPMD_ADDRESS="127.0.0.1",
    )


def start_rabbitmq() -> str:
    script, epmd = _rabbitmq_script(), shutil.which("epmd")
    if script is None or epmd is None:
        _fail(
            "RabbitMQ is not reachable at 127.0.0.1:5672 and rabbitmq-server is not installed. "
            "Run `apt-get install -y rabbitmq-server` (then this script starts a throwaway node "
            "itself, or you start the machine's own with `rabbitmq-server -detached`), or start "
            f"your own broker and set {RABBITMQ_ENV}=amqp://user:password@host:port/vhost; then "
            "run `make test` again."
        )
    port = THROWAWAY_RABBITMQ_PORT
    url = f"amqp://guest:guest@127.0.0.1:{port}//"
    if not _port_free(port):
        if _rabbitmq_answers(url):
            return url
        _fail(f"port {port} is taken by something else")
    for taken in (THROWAWAY_RABBITMQ_DIST_PORT, THROWAWAY_EPMD_PORT):
        if not _port_free(taken):
            _fail(f"port {taken}, needed by the throwaway RabbitMQ, is taken by something else")
    folder = STATE / "rabbitmq"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    env = _rabbitmq_environment(folder)
    # epmd in the foreground (no -daemon), so its pid is ours to stop as well
    epmd_process = subprocess.Popen(
        [epmd, "-port", str(THROWAWAY_EPMD_PORT), "-address", "127.0.0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    _record(epmd_process.pid)
    _wait(lambda: not _port_free(THROWAWAY_EPMD_PORT), "the throwaway RabbitMQ's epmd")
    with (folder / "server.log").open("wb") as log:
        # Without -detached the script stays in the foreground and turns SIGTERM into a clean stop.
        process = subprocess.Popen(
            [script], cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    _record(process.pid)
    _wait(lambda: process.poll() is not None or _rabbitmq_answers(url), "the throwaway RabbitMQ")
    if process.poll() is not None:
        log_tail = (folder / "server.log").read_text(errors="replace")[-2000:]
        _fail(f"the throwaway RabbitMQ exited at start-up; its output ends with:\n{log_tail}")
    return url


def start() -> None:
    postgresql = os.environ.get(POSTGRESQL_ENV, POSTGRESQL_DEFAULT)
    if not _postgresql_answers(postgresql):
        postgresql = start_postgresql()
    redis_url = os.environ.get(REDIS_ENV, REDIS_DEFAULT)
    if not _redis_answers(redis_url):
        redis_url = start_redis()
    rabbitmq_url = os.environ.get(RABBITMQ_ENV, RABBITMQ_DEFAULT)
    if not _rabbitmq_answers(rabbitmq_url):
        rabbitmq_url = start_rabbitmq()
    print(f"export {POSTGRESQL_ENV}='{postgresql}'")
    print(f"export {REDIS_ENV}='{redis_url}'")
    print(f"export {RABBITMQ_ENV}='{rabbitmq_url}'")


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop() -> None:
    """End the recorded servers, newest first (RabbitMQ before its epmd), and wait until they
    are gone, so a ``start`` right after finds their ports free again."""
    if not PIDS.exists():
        return
    pids = [int(line) for line in PIDS.read_text().split()]
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    PIDS.unlink()


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1]]()
