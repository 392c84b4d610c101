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
from pathlib import Path

STATE = Path(os.environ.get("PARALLEL_SCHEDULER_SERVICES_DIR", "/tmp/parallel-scheduler-services"))
PIDS = STATE / "pids"

POSTGRESQL_ENV = "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL"
REDIS_ENV = "PARALLEL_SCHEDULER_TEST_REDIS_URL"
POSTGRESQL_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS_DEFAULT = "redis://127.0.0.1:6379/0"
THROWAWAY_PG_PORT = 55432
THROWAWAY_REDIS_PORT = 56379


def _fail(message: str) -> None:
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


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _record(pid: int) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with PIDS.open("a") as f:
        f.write(f"{pid}\n")


def _wait(check: object, what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():  # type: ignore[operator]
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
        return url if _redis_answers(url) else _fail(f"port {port} is taken by something else")  # type: ignore[return-value]
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
        return url if _postgresql_answers(url) else _fail(f"port {port} is taken by something else")  # type: ignore[return-value]
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


def start() -> None:
    postgresql = os.environ.get(POSTGRESQL_ENV, POSTGRESQL_DEFAULT)
    if not _postgresql_answers(postgresql):
        postgresql = start_postgresql()
    redis_url = os.environ.get(REDIS_ENV, REDIS_DEFAULT)
    if not _redis_answers(redis_url):
        redis_url = start_redis()
    print(f"export {POSTGRESQL_ENV}='{postgresql}'")
    print(f"export {REDIS_ENV}='{redis_url}'")


def stop() -> None:
    if not PIDS.exists():
        return
    for line in PIDS.read_text().split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGTERM)
    PIDS.unlink()


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1]]()
