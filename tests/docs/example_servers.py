"""The servers a documentation page's examples talk to, isolated from every other test.

Examples name exactly three server URLs (and ``sqlite:///jobs.db``, a file in the page's
directory, which needs nothing):

- ``postgresql://postgres@127.0.0.1:5432/test`` becomes a database made for the page
  (``docs_examples_<pid>_<n>``) on the test PostgreSQL server, dropped when the page ends;
- ``redis://127.0.0.1:6379/0`` becomes a database number of the test Redis server that no other
  test uses (8 to 15), claimed for the session with a key, so two test runs at once take two of
  them; it is emptied before each page and when the session ends;
- ``amqp://guest:guest@127.0.0.1:5672//`` becomes a virtual host made for the page on the test
  RabbitMQ (with ``rabbitmqctl``, when it answers for a broker on this machine's default port),
  else the test broker's default virtual host.

The hosts and ports are the test servers' (``PARALLEL_SCHEDULER_TEST_*_URL``, from
``devtools.services``). Any other URL of a server on 5432, 6379 or 5672 in a page's runnable
blocks is refused: it would reach a database other tests use.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from tests import conftest as shared

__all__ = [
    "EXAMPLE_POSTGRESQL",
    "EXAMPLE_RABBITMQ",
    "EXAMPLE_REDIS",
    "ExampleServers",
    "stray_server_urls",
]

EXAMPLE_POSTGRESQL = "postgresql://postgres@127.0.0.1:5432/test"
EXAMPLE_REDIS = "redis://127.0.0.1:6379/0"
EXAMPLE_RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"

_POSTGRESQL = re.compile(
    r"(?P<scheme>postgresql(?:\+psycopg)?)://postgres@127\.0\.0\.1:5432/test\b"
)
_REDIS = re.compile(r"redis://127\.0\.0\.1:6379/0(?![\w.])")
_RABBITMQ = re.compile(re.escape(EXAMPLE_RABBITMQ))
_ANY_SERVER = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\]):(?:5432|6379|5672)\b")
#: Redis database numbers the examples may take; the other tests use 0 to 3.
REDIS_DATABASES = range(8, 16)
_CLAIM = "parallel-scheduler:docs-examples:claim"
_CLAIM_SECONDS = 4 * 3600


def uses(text: str) -> set[str]:
    """The servers ``text`` names by their example URLs: a subset of postgresql, redis,
    rabbitmq."""
    found = set()
    if _POSTGRESQL.search(text):
        found.add("postgresql")
    if _REDIS.search(text):
        found.add("redis")
    if _RABBITMQ.search(text):
        found.add("rabbitmq")
    return found


def stray_server_urls(text: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every server address in ``text`` that is not one of the three example
    URLs, which the runner could not isolate."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        rest = _RABBITMQ.sub("", _REDIS.sub("", _POSTGRESQL.sub("", line)))
        found.extend((number, match.group(0)) for match in _ANY_SERVER.finditer(rest))
    return found


def _gone(owner: bytes | None) -> bool:
    """True when a claim's owner, a process id, is no process of this machine any more."""
    try:
        os.kill(int(owner or b"0"), 0)
    except ProcessLookupError:
        return True
    except (ValueError, PermissionError):
        return False
    return int(owner or b"0") <= 0


def _netloc(url: str) -> str:
    return urlsplit(url).netloc


@dataclass
class ExampleServers:
    """The session's isolated servers; ``for_page`` gives one page its URLs."""

    redis_db: int | None = None
    _pages: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # -- Redis: one claimed database for the session --------------------------------------

    def _redis(self, db: int) -> object:
        import redis

        parts = urlsplit(shared.REDIS_URL)
        return redis.Redis(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            password=parts.password,
            db=db,
            socket_connect_timeout=5,
        )

    def _claim_redis(self) -> int:
        if self.redis_db is None:
            for db in REDIS_DATABASES:
                client = self._redis(db)
                if client.set(_CLAIM, str(os.getpid()), nx=True, ex=_CLAIM_SECONDS):  # type: ignore[attr-defined]
                    self.redis_db = db
                    break
                if _gone(client.get(_CLAIM)):  # type: ignore[attr-defined]
                    self.redis_db = db  # claimed by a run on this machine that has ended
                    break
            else:
                raise RuntimeError(
                    f"every Redis database of {list(REDIS_DATABASES)} is claimed by another docs "
                    f"run (key {_CLAIM}); wait for it, or delete the key if that run is gone"
                )
        client = self._redis(self.redis_db)
        client.flushdb()  # type: ignore[attr-defined]
        client.set(_CLAIM, str(os.getpid()), ex=_CLAIM_SECONDS)  # type: ignore[attr-defined]
        return self.redis_db

    def close(self) -> None:
        if self.redis_db is not None:
            self._redis(self.redis_db).flushdb()  # type: ignore[attr-defined]
            self.redis_db = None

    # -- one page ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def for_page(self, needs: set[str]) -> Iterator[PageServers]:
        """The page's URLs for the servers in ``needs``, made now and removed afterwards."""
        number = next(self._pages)
        name = f"docs_examples_{os.getpid()}_{number}"
        page = PageServers()
        with contextlib.ExitStack() as cleanup:
            if "postgresql" in needs:
                page.postgresql = cleanup.enter_context(_postgresql_database(name))
            if "redis" in needs:
                db = self._claim_redis()
                page.redis = f"redis://{_netloc(shared.REDIS_URL)}/{db}"
            if "rabbitmq" in needs:
                page.rabbitmq = cleanup.enter_context(_rabbitmq_vhost(name))
            yield page


@dataclass
class PageServers:
    """One page's server URLs (``None``: the page does not use that server)."""

    postgresql: str | None = None  # user@host:port/database, without the scheme
    redis: str | None = None
    rabbitmq: str | None = None

    def rewrite(self, text: str) -> str:
        """``text`` with the example URLs replaced by this page's."""
        if self.postgresql is not None:
            target = self.postgresql
            text = _POSTGRESQL.sub(lambda m: f"{m.group('scheme')}://{target}", text)
        if self.redis is not None:
            text = _REDIS.sub(self.redis, text)
        if self.rabbitmq is not None:
            text = text.replace(EXAMPLE_RABBITMQ, self.rabbitmq)
        return text


@contextlib.contextmanager
def _postgresql_database(name: str) -> Iterator[str]:
    import psycopg

    dsn = shared.POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(dsn)
    try:
        yield f"{parts.netloc}/{name}"
    finally:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _rabbitmqctl(*args: str) -> bool:
    command = shutil.which("rabbitmqctl")
    if command is None:
        return False
    try:
        done = subprocess.run(
            [command, *args], capture_output=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@contextlib.contextmanager
def _rabbitmq_vhost(name: str) -> Iterator[str]:
    """The page's broker URL: a virtual host of its own when ``rabbitmqctl`` can make one on
    the test broker (the machine's own, on the default port), else the test broker's URL."""
    parts = urlsplit(shared.RABBITMQ_URL)
    user = parts.username or "guest"
    local = parts.hostname in ("127.0.0.1", "localhost") and (parts.port or 5672) == 5672
    if not (local and _rabbitmqctl("add_vhost", name)):
        yield shared.RABBITMQ_URL
        return
    try:
        if not _rabbitmqctl("set_permissions", "-p", name, user, ".*", ".*", ".*"):
            raise RuntimeError(f"rabbitmqctl could not let {user} use the virtual host {name}")
        yield f"amqp://{parts.netloc}/{quote(name, safe='')}"
    finally:
        _rabbitmqctl("delete_vhost", name)
