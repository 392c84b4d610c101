"""Looking at the storage server before a sweep: where it is, its round trip, its free connections.

The round trip is what decides whether parallelism pays (a claim costs a few of them), so the
profile measures it the same way for the direct path and through the latency proxy: the median of
many trivial requests (``SELECT 1``, ``PING``) on one open connection, after a few to warm it up.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from parallel_scheduler.profiling.errors import ProfileError, scrub
from storage_adapters import mask_url
from storage_adapters.urls import scheme_of

__all__ = [
    "RTT_SAMPLES",
    "connection_headroom",
    "is_networked",
    "measure_rtt",
    "server_address",
    "via_proxy",
]

RTT_SAMPLES = 20
RTT_WARMUP = 3
DEFAULT_PORTS = {"postgres": 5432, "redis": 6379}
_HOST_QUERY_KEYS = frozenset({"host", "hostaddr", "port"})


def _family(url: str) -> str:
    scheme = scheme_of(url)
    if scheme.startswith("postgres"):
        return "postgres"
    if scheme in ("redis", "rediss"):
        return "redis"
    return scheme  # sqlite, unix: no TCP link to put a proxy on


def is_networked(url: str) -> bool:
    return _family(url) in DEFAULT_PORTS


def server_address(url: str) -> tuple[str, int]:
    """The TCP host and port the storage URL connects to (for the proxy's upstream)."""
    family = _family(url)
    if family not in DEFAULT_PORTS:
        raise ProfileError(
            f"--latency-ms needs a storage server reached over TCP (postgresql:// or redis://), "
            f"not {mask_url(url)!r}"
        )
    parts = urlsplit(url)
    if any(key in _HOST_QUERY_KEYS for key, _ in parse_qsl(parts.query)):
        raise ProfileError(
            f"--latency-ms: put the host and port in the URL's address, not its query: "
            f"{mask_url(url)!r}"
        )
    if not parts.hostname:
        raise ProfileError(f"--latency-ms: {mask_url(url)!r} names no host")
    return parts.hostname, parts.port or DEFAULT_PORTS[family]


def via_proxy(url: str, port: int) -> str:
    """``url`` with its address replaced by ``127.0.0.1:port``; user, password, path kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _libpq_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.lower().startswith("postgres") else url


def _round_tripper(url: str) -> tuple[Callable[[], object], Callable[[], None]]:
    """A callable doing one trivial request, and one closing its connection."""
    if _family(url) == "postgres":
        import psycopg

        connection = psycopg.connect(_libpq_url(url), autocommit=True, connect_timeout=10)
        return (lambda: connection.execute("SELECT 1").fetchone()), connection.close
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=10)
    return client.ping, client.close


def _unreachable(url: str, exc: Exception) -> ProfileError:
    detail = scrub(f"{type(exc).__name__}: {exc}", url).strip()
    return ProfileError(f"cannot reach {mask_url(url)!r}: {detail}")


def measure_rtt(url: str, samples: int = RTT_SAMPLES) -> float:
    """The median round trip, in seconds, of ``samples`` trivial requests on one connection."""
    try:
        request, close = _round_tripper(url)
    except Exception as exc:
        raise _unreachable(url, exc) from None
    try:
        for _ in range(RTT_WARMUP):
            request()
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            request()
            times.append(time.perf_counter() - started)
    finally:
        close()
    return statistics.median(times)


def connection_headroom(url: str) -> tuple[int, int] | None:
    """PostgreSQL only: ``(free, max_connections)`` for this role now; ``None`` elsewhere.

    A scheduler with parallelism P holds up to P+1 connections, and a server refusing one
    mid-pass would abort the sweep, so the profile skips cells the server cannot serve.
    """
    if _family(url) != "postgres":
        return None
    import psycopg

    query = """
        SELECT current_setting('max_connections')::int,
               current_setting('superuser_reserved_connections')::int,
               (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
               (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
    """
    try:
        with psycopg.connect(_libpq_url(url), autocommit=True, connect_timeout=10) as connection:
            row = connection.execute(query).fetchone()
    except Exception as exc:
        raise _unreachable(url, exc) from None
    assert row is not None
    maximum, reserved, superuser, used = (int(row[0]), int(row[1]), bool(row[2]), int(row[3]))
    usable = maximum if superuser else maximum - reserved
    # The probe's own connection is counted in ``used`` and closes now.
    return usable - used + 1, maximum
