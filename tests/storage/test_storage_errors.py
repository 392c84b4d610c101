"""Permanent storage errors fail at once; only what can heal is retried (issue 9, item 6).

A database that does not exist, credentials the server refuses, a host name DNS does not know, a
file that is not an SQLite database: retrying cannot fix any of them, so each is raised at once as
``StorageConfigurationError`` (one line, naming the problem, the password masked) with no WARNING
retry lines. A refused connection (a server restarting) is still retried, for a bounded time.
Real servers only; the one non-loopback name used is ``.invalid``, which fails in DNS.

"At once" is counted, not timed (a loaded CI machine makes any wall-clock ceiling flaky): the
attempts to reach the storage are observed from outside the code under test, as connections
through a loopback relay to the real server, DNS lookups of the unknown host, or opens of the
SQLite file, and a permanent error must have made exactly one attempt. "A bounded time" is the
sum of the waits the retry policy announced in its WARNING lines: within the retry budget, however
long each attempt took.
"""

from __future__ import annotations

import logging
import signal
import socket
import sqlite3.dbapi2
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import storage_adapters
from devtools.servers import MissingBinaryError, RedisServer, new_workdir
from parallel_scheduler import Client
from parallel_scheduler.cli import main
from storage_adapters import StorageConfigurationError, StorageUnavailableError
from storage_adapters.permanent import dns_problem, postgresql_problem
from tests.conftest import IN_CI, POSTGRESQL_URL, REDIS_URL, require_server
from tests.loopback import CountingListener
from tests.retry_warnings import RETRY_LOGGER, announced_waits

SECRET = "s3cret-xyz"


def _with(
    url: str,
    *,
    user: str | None = None,
    host: str | None = None,
    port: int | None = None,
    path: str | None = None,
) -> str:
    """``url`` with its user (and ``SECRET`` as password), host, port or path replaced."""
    parts = urlsplit(url)
    netloc = host or parts.hostname or ""
    if (port or parts.port) is not None:
        netloc += f":{port or parts.port}"
    if user is not None:
        netloc = f"{user}:{SECRET}@{netloc}"
    elif parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc, path=path if path is not None else parts.path))


def _free_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _not_a_database(tmp_path: Path) -> str:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not an SQLite database\n" * 20)
    return f"sqlite:///{path}"


def _read_only(tmp_path: Path) -> str:
    """A real database, opened read-only (what a file without write permission gives too)."""
    path = tmp_path / "ro.db"
    writable = storage_adapters.from_url(f"sqlite:///{path}", prefix="permanent")
    writable.setup()
    writable.close()
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def _postgresql(**parts: str) -> Callable[[Path], str]:
    return lambda tmp: _with(POSTGRESQL_URL, **parts)  # type: ignore[arg-type]


def _redis(**parts: str) -> Callable[[Path], str]:
    return lambda tmp: _with(REDIS_URL, **parts)  # type: ignore[arg-type]


def _missing_directory(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'x.db'}"


# "<server>: <case>": (url maker, words the error must contain); the server is required first
PERMANENT: dict[str, tuple[Callable[[Path], str], str]] = {
    "postgresql: no such database": (
        _postgresql(path="/does_not_exist_xyz"), "database does not exist"
    ),
    "postgresql: no such role (password masked)": (_postgresql(user="no_such_role_xyz"), "role"),
    "postgresql: unknown host": (_postgresql(host="nonexistent.invalid"), "does not resolve"),
    "redis: wrong user and password": (_redis(user="no_such_user_xyz"), "authentication failed"),
    "redis: no such database number": (_redis(path="/999"), "database number"),
    "redis: unknown host": (_redis(host="nonexistent.invalid"), "does not resolve"),
    "sqlite: missing directory": (_missing_directory, "does not exist"),
    "sqlite: path is a directory": (lambda tmp: f"sqlite:///{tmp}", "is a directory"),
    "sqlite: not a database": (_not_a_database, "not an SQLite database"),
    "sqlite: read-only": (_read_only, "read-only"),
}  # fmt: skip


#: The connections one attempt makes, where that is not one: the failing ``SELECT 999`` is a
#: ResponseError, which Redis's server-version check tolerates (INFO may be disabled), so the
#: setup's first command connects again and fails for good.
ONE_ATTEMPT = {"redis: no such database number": 2}


@contextmanager
def _counted(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Callable[[], int]]]:
    """``url`` made countable, and a count of the attempts made so far to reach its storage:
    the connections through a loopback relay to its server (the URL then names the relay, its
    password kept), the DNS lookups of its unknown host, or the opens of its SQLite file."""
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        opens: list[object] = []
        connect = sqlite3.dbapi2.connect

        def counted_connect(*args: Any, **kwargs: Any) -> Any:
            opens.append(args)
            return connect(*args, **kwargs)

        monkeypatch.setattr(sqlite3.dbapi2, "connect", counted_connect)
        yield url, lambda: len(opens)
    elif parts.hostname is not None and parts.hostname.endswith(".invalid"):
        lookups: list[object] = []
        getaddrinfo = socket.getaddrinfo

        def counted_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host == parts.hostname:
                lookups.append(host)
            return getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", counted_lookup)
        yield url, lambda: len(lookups)
    else:
        with CountingListener("forward", upstream=(parts.hostname or "", parts.port or 0)) as relay:
            userinfo = parts.netloc.rpartition("@")[0]
            netloc = f"{userinfo}@127.0.0.1:{relay.port}" if userinfo else f"127.0.0.1:{relay.port}"
            yield urlunsplit(parts._replace(netloc=netloc)), lambda: relay.connections


def _permanent(case: str, tmp_path: Path) -> tuple[str, str]:
    """The URL of ``case`` (its server required first, unless SQLite) and the words its error
    must contain."""
    server = case.split(":")[0]
    if server != "sqlite":
        require_server(server)
    make_url, words = PERMANENT[case]
    return make_url(tmp_path), words


@pytest.mark.parametrize("case", PERMANENT)
def test_a_permanent_error_is_raised_at_once_without_retries(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, words = _permanent(case, tmp_path)
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    with _counted(url, monkeypatch) as (url, attempts):
        client = Client(storage_url=url, prefix="permanent")  # retries for 30 s by default
        with pytest.raises(StorageConfigurationError) as error:
            client.setup()  # most fail here; a read-only database fails at its first write
            client.schedule("tasks.x", countdown=5)
        client.close()
        made = attempts()
    message = str(error.value)
    assert made == ONE_ATTEMPT.get(case, 1), f"{made} attempts: {message}"  # no retry, no loop
    assert not [r for r in caplog.records if r.name == RETRY_LOGGER], caplog.text
    assert words in message
    assert SECRET not in message and "\n" not in message
    assert not isinstance(error.value, StorageUnavailableError)


@pytest.mark.parametrize(
    "case",
    ["postgresql: no such database", "redis: wrong user and password", "sqlite: not a database"],
)
def test_the_cli_reports_a_permanent_error_in_one_line_at_once(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, words = _permanent(case, tmp_path)
    with _counted(url, monkeypatch) as (url, attempts):
        code = main(["--storage-url", url, "schedule", "tasks.x", "--countdown=5"])
        made = attempts()
    err = capsys.readouterr().err
    assert code != 0
    assert made == ONE_ATTEMPT.get(case, 1), f"{made} attempts: {err}"  # no retry, no loop
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and words in errors[0], err  # (the CLI also names its store first)
    assert "WARNING" not in err and "Traceback" not in err and SECRET not in err


class _PasswordRedis(RedisServer):
    """A throwaway Redis that requires a password, for the errors the shared one cannot give
    (it has no password, and its default user takes any): NOAUTH, and WRONGPASS for a password."""

    def _command(self) -> list[str]:
        return [*super()._command(), "--requirepass", "right-password"]

    def answers(self) -> bool:
        import redis

        try:
            client = redis.Redis(port=self.port, password="right-password", socket_timeout=2)
            return bool(client.ping())
        except redis.RedisError:
            return False

    def _graceful_stop(self, save: bool) -> None:
        """SIGTERM to the process this test started: the base class asks without a password."""
        self.kill() if self._process is None else self._process.send_signal(signal.SIGTERM)


@pytest.fixture(scope="module")
def password_redis() -> Iterator[_PasswordRedis]:
    try:
        server = _PasswordRedis(new_workdir("redis-password"), label="redis-password")
    except MissingBinaryError as exc:
        if IN_CI:
            pytest.fail(f"{exc}; CI=true forbids skipping storage tests")
        pytest.skip(str(exc))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(
    ("userinfo", "words"),
    [("", "authenticated"), (":wrong@", "invalid"), ("default:wrong@", "invalid")],
)
def test_redis_without_or_with_a_wrong_password_fails_at_once(
    password_redis: _PasswordRedis, userinfo: str, words: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    with CountingListener("forward", upstream=("127.0.0.1", password_redis.port)) as relay:
        client = Client(storage_url=f"redis://{userinfo}127.0.0.1:{relay.port}/0", prefix="auth")
        with pytest.raises(StorageConfigurationError, match="authentication failed") as error:
            client.setup()
        client.close()
        assert relay.connections == 1, relay.connections  # one attempt: no retry, no loop
    assert not caplog.records, caplog.text
    assert words in str(error.value) and "wrong@" not in str(error.value), error.value
    right = Client(storage_url=f"redis://:right-password@127.0.0.1:{password_redis.port}/0")
    right.setup()  # the same server with the right password works: the error was the password
    assert right.counts()["scheduled"] == 0
    right.close()


@pytest.mark.parametrize("server", ["postgresql", "redis"])
def test_a_refused_connection_is_still_retried_for_a_bounded_time(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    require_server(server)  # the driver must be importable; the server itself is not used
    base = POSTGRESQL_URL if server == "postgresql" else REDIS_URL
    url = _with(base, host="127.0.0.1", port=_free_port())
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    client = Client(storage_url=url, prefix="refused", retry_for=1.0)
    with pytest.raises(StorageUnavailableError, match="unavailable"):
        client.setup()
    client.close()
    waits = announced_waits(caplog)
    assert len(waits) >= 2, caplog.text  # it was retried ...
    assert sum(waits) < 1.0, waits  # ... and waited within its budget (1 s), never past it


def test_a_temporary_dns_failure_is_not_permanent() -> None:
    """EAI_AGAIN (the resolver could not answer now) can heal, unlike EAI_NONAME."""
    temporary = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    unknown = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert dns_problem(temporary) is None
    assert dns_problem(unknown) is not None


@pytest.mark.parametrize(
    ("message", "sqlstate", "permanent"),
    [
        ('FATAL:  password authentication failed for user "x"', None, True),
        ('FATAL:  no pg_hba.conf entry for host "1.2.3.4", user "x"', None, True),
        ("FATAL:  the database system is starting up", None, False),
        ("FATAL:  sorry, too many clients already", None, False),
        ("terminating connection due to administrator command", "57P01", False),
        ("anything", "28P01", True),
        ("anything", "3D000", True),
    ],
)
def test_postgresql_messages_are_classified(
    message: str, sqlstate: str | None, permanent: bool
) -> None:
    """The server messages that cannot be produced on the shared test server (it trusts every
    local user, and is never restarting when a test runs)."""
    assert (postgresql_problem(message, sqlstate) is not None) is permanent
