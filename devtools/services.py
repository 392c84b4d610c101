"""Make sure the servers the tests need are reachable, starting throwaway ones if they are not.

``start`` prints ``export NAME=URL`` lines for the shell to evaluate: the machine's own servers when
they answer, otherwise servers started here from the installed binaries, on their own ports and
data directories, which ``stop`` ends again (by the process ids recorded at start, nothing else).
When neither works it says exactly what to run, and fails. It also starts a throwaway six-node
Redis Cluster on free ports (``devtools.redis_cluster``), or reuses the one a previous ``start``
left running and whole, and exports its URL as ``PARALLEL_SCHEDULER_TEST_REDIS_CLUSTER_URL``
(unless that variable names a cluster already).

    python -m devtools.services start    # eval its output: `eval "$(make -s services)"`
    python -m devtools.services stop

A thin command over the server launcher (``devtools.servers``), the one place that knows how to
start PostgreSQL, Redis and RabbitMQ from their binaries. ``$PARALLEL_SCHEDULER_SERVICES_DIR``
(default ``/tmp/parallel-scheduler-services``) keeps their data and the pids ``stop`` ends.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from devtools import redis_cluster
from devtools.servers import (
    MissingBinaryError,
    PostgresServer,
    RabbitMQServer,
    RedisServer,
    Server,
    port_free,
    stop_pids,
)

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

MISSING = {
    "postgresql": "PostgreSQL is not reachable at 127.0.0.1:5432 and its server binaries are not "
    "installed. Run `apt-get install -y postgresql` (or start your own server and set "
    f"{POSTGRESQL_ENV}=postgresql://user@host:port/db), then run `make test` again.",
    "redis": "Redis is not reachable at 127.0.0.1:6379 and redis-server is not installed. Run "
    "`apt-get install -y redis-server` (or start your own Redis and set "
    f"{REDIS_ENV}=redis://host:port/0), then run `make test` again.",
    "rabbitmq": "RabbitMQ is not reachable at 127.0.0.1:5672 and rabbitmq-server is not "
    "installed. Run `apt-get install -y rabbitmq-server` (then this command starts a throwaway "
    "node itself, or you start the machine's own with `rabbitmq-server -detached`), or start "
    f"your own broker and set {RABBITMQ_ENV}=amqp://user:password@host:port/vhost; then run "
    "`make test` again.",
}


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


def _throwaway(kind: str, url: str, answers: Callable[[str], bool], ports: tuple[int, ...]) -> str:
    """Start one server with the launcher on its fixed ports (reusing one a previous ``start``
    left answering there), record its pids for ``stop``, and return its URL."""
    if not port_free(ports[0]):
        if answers(url):
            return url
        _fail(f"port {ports[0]} is taken by something else")
    for taken in ports[1:]:
        if not port_free(taken):
            _fail(f"port {taken}, needed by the throwaway RabbitMQ, is taken by something else")
    try:
        server = _build(kind, STATE / kind)
    except MissingBinaryError:
        _fail(MISSING[kind])
    try:
        server.start()
    except (RuntimeError, TimeoutError) as exc:
        _fail(f"the throwaway {kind} did not start: {exc}")
    finally:
        STATE.mkdir(parents=True, exist_ok=True)
        with PIDS.open("a") as f:
            f.writelines(f"{pid}\n" for pid in server.pids())
    return url


def _fresh(folder: Path, owner: str | None = None) -> Path:
    """An empty data folder; ``owner`` must be able to reach it (PostgreSQL runs as postgres)."""
    if folder.exists():
        shutil.rmtree(folder)
    STATE.mkdir(parents=True, exist_ok=True)
    if owner is not None and os.geteuid() == 0:
        shutil.chown(STATE, owner)
    return folder


def _build(kind: str, folder: Path) -> Server:
    """The launcher's server of ``kind`` on this command's fixed ports, in ``folder``."""
    if kind == "postgresql":
        return PostgresServer(_fresh(folder, "postgres"), THROWAWAY_PG_PORT)
    if kind == "redis":
        return RedisServer(folder, THROWAWAY_REDIS_PORT)
    return RabbitMQServer(
        _fresh(folder),
        THROWAWAY_RABBITMQ_PORT,
        dist_port=THROWAWAY_RABBITMQ_DIST_PORT,
        epmd_port=THROWAWAY_EPMD_PORT,
        node=THROWAWAY_RABBITMQ_NODE,
    )


#: kind -> (its variable, the machine's default, the throwaway's URL, its ports, is it up)
SERVICES: dict[str, tuple[str, str, str, tuple[int, ...], Callable[[str], bool]]] = {
    "postgresql": (
        POSTGRESQL_ENV, POSTGRESQL_DEFAULT,
        f"postgresql+psycopg://postgres@127.0.0.1:{THROWAWAY_PG_PORT}/postgres",
        (THROWAWAY_PG_PORT,), _postgresql_answers,
    ),
    "redis": (
        REDIS_ENV, REDIS_DEFAULT, f"redis://127.0.0.1:{THROWAWAY_REDIS_PORT}/0",
        (THROWAWAY_REDIS_PORT,), _redis_answers,
    ),
    "rabbitmq": (
        RABBITMQ_ENV, RABBITMQ_DEFAULT, f"amqp://guest:guest@127.0.0.1:{THROWAWAY_RABBITMQ_PORT}//",
        (THROWAWAY_RABBITMQ_PORT, THROWAWAY_RABBITMQ_DIST_PORT, THROWAWAY_EPMD_PORT),
        _rabbitmq_answers,
    ),
}  # fmt: skip


CLUSTER_FOLDER = STATE / "redis-cluster"


def _cluster_url() -> str:
    """The environment's cluster, else the throwaway one a previous ``start`` left running and
    whole, else a new throwaway one on free ports (``stop`` ends it)."""
    url = os.environ.get(redis_cluster.ENV)
    if url:
        return url
    running = redis_cluster.recorded(CLUSTER_FOLDER)
    if running is not None:
        return running.url
    redis_cluster.stop_recorded(CLUSTER_FOLDER)  # a previous start's, left broken
    try:
        return redis_cluster.start(CLUSTER_FOLDER).url
    except redis_cluster.MissingBinaryError as exc:
        _fail(str(exc))
    except (RuntimeError, TimeoutError) as exc:
        _fail(f"the throwaway Redis Cluster did not start: {exc}")


def start() -> None:
    exports = []
    for kind, (variable, default, throwaway, ports, answers) in SERVICES.items():
        url = os.environ.get(variable, default)
        if not answers(url):
            url = _throwaway(kind, throwaway, answers, ports)
        exports.append(f"export {variable}='{url}'")
    exports.append(f"export {redis_cluster.ENV}='{_cluster_url()}'")
    print("\n".join(exports))


def stop() -> None:
    """End the recorded servers, newest first (RabbitMQ before its epmd), and wait until they
    are gone, so a ``start`` right after finds their ports free again; and the throwaway Redis
    Cluster, by the pids its ``start`` recorded."""
    redis_cluster.stop_recorded(CLUSTER_FOLDER)
    if not PIDS.exists():
        return
    stop_pids([int(line) for line in PIDS.read_text().split()])
    PIDS.unlink()


def main(argv: list[str]) -> int:
    commands = {"start": start, "stop": stop}
    if len(argv) != 1 or argv[0] not in commands:
        print("usage: python -m devtools.services start|stop", file=sys.stderr)
        return 2
    commands[argv[0]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
