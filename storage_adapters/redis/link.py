"""The connection a ``RedisStorage`` talks through: one server (``redis://``, ``rediss://``,
``unix://``) or a Redis Cluster (``redis+cluster://host:port,host:port``), and the options of this
adapter's own that ride in the URL's query.

A ``RedisLink`` owns the client and its connection pools; a storage and its siblings
(``RedisStorage.sibling``: the same server, another prefix) share one link, and only the storage
that made it closes it.

**Cluster URLs**: ``redis+cluster://[[user]:password@]host:port[,host:port...][/0][?options]``.
The hosts are startup nodes (the client learns the rest of the cluster from them); a cluster has
only database 0. Every key of a prefix carries the hash tag ``{prefix}``, so all of them live in
one slot and every script runs on the one master that owns it.

**Options** (both URL kinds): ``wait_replicas=N`` makes every write wait, after it ran, until ``N``
replicas acknowledged it (Redis ``WAIT``, sent on the same connection to the same master), for at
most ``wait_timeout_ms`` milliseconds (default 1000); fewer acknowledgements fail the call with
``StorageUnavailableError``. Replication is asynchronous: without this a master that dies loses the
writes it acknowledged but had not yet sent to its replica, and the promoted replica does not have
them.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.retry import Retry

from storage_adapters.urls import InvalidStorageURLError, mask_url

__all__ = ["DEFAULT_WAIT_TIMEOUT_MS", "RedisLink", "RedisTarget", "parse_target"]

CLUSTER_SCHEME = "redis+cluster"
DEFAULT_WAIT_TIMEOUT_MS = 1000
MAX_WAIT_TIMEOUT_MS = 600_000
MAX_WAIT_REPLICAS = 100
_OPTIONS = ("wait_replicas", "wait_timeout_ms")
POOL_WAIT_SECONDS = 30.0  # how long a caller queues for a free connection before giving up
#: A reply can take this long (a release script over a big chunk) before the link counts as lost.
SOCKET_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class RedisTarget:
    """What a storage URL asks for: a plain server (``url``, without this adapter's options)
    or cluster startup ``nodes``, and how many replicas must acknowledge each write."""

    masked_url: str
    clustered: bool
    url: str = ""
    nodes: tuple[tuple[str, int], ...] = ()
    username: str | None = None
    password: str | None = None
    wait_replicas: int = 0
    wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS


def _bad(masked: str, problem: str) -> InvalidStorageURLError:
    return InvalidStorageURLError(f"invalid Redis URL {masked!r}: {problem}")


def _number(masked: str, name: str, text: str, low: int, high: int) -> int:
    if not text.isdigit() or not low <= int(text) <= high:
        raise _bad(masked, f"{name} must be a whole number in [{low}, {high}], not {text!r}")
    return int(text)


def _options(masked: str, query: str, strict: bool) -> tuple[dict[str, int], str | None]:
    """This adapter's options, and the query left for redis-py, ``None`` when none of this
    adapter's options was in it (``strict``: nothing may be left, as the cluster client takes no
    URL options)."""
    found = {"wait_replicas": 0, "wait_timeout_ms": DEFAULT_WAIT_TIMEOUT_MS}
    rest = []
    pairs = parse_qsl(query, keep_blank_values=True)
    for key, value in pairs:
        if key == "wait_replicas":
            found[key] = _number(masked, key, value, 0, MAX_WAIT_REPLICAS)
        elif key == "wait_timeout_ms":
            found[key] = _number(masked, key, value, 1, MAX_WAIT_TIMEOUT_MS)
        elif strict:
            raise _bad(
                masked, f"unknown option {key!r} (a cluster URL accepts {', '.join(_OPTIONS)})"
            )
        else:
            rest.append((key, value))
    return found, (None if len(rest) == len(pairs) else urlencode(rest))


def _waits(options: dict[str, int]) -> dict[str, Any]:
    return {
        "wait_replicas": options["wait_replicas"],
        "wait_timeout_ms": options["wait_timeout_ms"],
    }


def _node(masked: str, text: str) -> tuple[str, int]:
    if text.startswith("["):  # [IPv6]:port
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "6379")
    if not host:
        raise _bad(masked, f"node {text!r} has no host (expected host:port)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad(masked, f"node {text!r} has a bad port {port!r} (expected 1-65535)")
    return host, int(port)


def parse_target(url: str) -> RedisTarget:
    """The target ``url`` names, checked: a clear ``InvalidStorageURLError`` (password masked)
    for a cluster URL without a host, with a bad port, a database other than 0 or an unknown
    option, or for a bad option value in any Redis URL."""
    masked = mask_url(url)
    parts = urlsplit(url)
    clustered = parts.scheme.lower() == CLUSTER_SCHEME
    options, rest = _options(masked, parts.query, strict=clustered)
    if not clustered:
        # Edit the text: urlunsplit would drop unix:///'s empty host.
        plain = (
            url if rest is None else url.replace("?" + parts.query, f"?{rest}" if rest else "", 1)
        )
        return RedisTarget(masked, False, url=plain, **_waits(options))
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not hosts.strip(","):
        raise _bad(masked, "no host: expected redis+cluster://host:port[,host:port...]")
    nodes = tuple(_node(masked, node) for node in hosts.split(",") if node)
    if parts.path not in ("", "/", "/0"):
        raise _bad(masked, f"a Redis Cluster has only database 0, not {parts.path[1:]!r}")
    user, _, password = userinfo.partition(":") if at else ("", "", "")
    return RedisTarget(
        masked,
        True,
        nodes=nodes,
        username=unquote(user) or None,
        password=unquote(password) or None,
        **_waits(options),
    )


class RedisLink:
    """One client and its pools, shared by a storage and its siblings.

    The plain client connects on first use; so does the cluster client, made on first use
    (redis-py's ``RedisCluster`` reads the cluster's layout as it is built, and a storage must be
    constructible while its server is down). Neither retries a command inside redis-py: a
    timed-out script may still have run, and replaying a claim or an accept would misreport it.
    The cluster client still follows ``MOVED``/``ASK`` redirections, which answer for a command
    that did not run.
    """

    def __init__(
        self, target: RedisTarget, script_sources: dict[str, str], pool_size: int, timeout: float
    ) -> None:
        self.target = target
        self.clustered = target.clustered
        self.closed = False
        self._sources = script_sources
        self._timeout = timeout
        self._pool_size = pool_size
        self._lock = threading.Lock()
        self._client: Any = None
        self.scripts: dict[str, Script] = {}
        self.db = 0
        if not self.clustered:
            try:
                self._pool = redis.BlockingConnectionPool.from_url(
                    target.url,
                    max_connections=pool_size + 2,
                    timeout=POOL_WAIT_SECONDS,
                    decode_responses=True,
                    socket_connect_timeout=timeout,
                    socket_timeout=max(SOCKET_TIMEOUT_SECONDS, timeout),
                )
            except ValueError as exc:
                raise _bad(target.masked_url, str(exc)) from None
            self.db = int(self._pool.connection_kwargs.get("db") or 0)
            self._ready(redis.Redis(connection_pool=self._pool))

    def _ready(self, client: Any) -> None:
        self.scripts = {name: client.register_script(src) for name, src in self._sources.items()}
        self._client = client

    def client(self) -> Any:
        """The client (``redis.Redis`` or ``redis.cluster.RedisCluster``), made on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._ready(self._cluster_client())
        return self._client

    def _cluster_client(self) -> Any:
        from redis.cluster import ClusterNode, RedisCluster

        target = self.target
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],  # type: ignore[no-untyped-call]
            username=target.username,
            password=target.password,
            decode_responses=True,
            socket_connect_timeout=self._timeout,
            socket_timeout=max(SOCKET_TIMEOUT_SECONDS, self._timeout),
            retry=Retry(NoBackoff(), 0),
        )

    def owner(self, key: str) -> Any:
        """The ``redis.Redis`` client of the master that owns ``key``'s slot (the client itself
        for a single server): for commands that must run on that node, on one connection."""
        client = self.client()
        if not self.clustered:
            return client
        return client.get_redis_connection(client.get_node_from_key(key))

    def owner_node(self, key: str) -> Any:
        """The cluster node (``target_nodes`` argument) that owns ``key``'s slot."""
        return self.client().get_node_from_key(key)

    def refresh(self) -> None:
        """Re-read the cluster's layout after a failure seen outside the cluster client (a
        command sent to a node directly): the next call then reaches the new master."""
        if self.clustered and self._client is not None:
            # Still unreachable: the next failing call tries again.
            with contextlib.suppress(Exception):
                self._client.nodes_manager.initialize()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._client is not None:
            self._client.close()
        if not self.clustered:
            self._pool.disconnect()
