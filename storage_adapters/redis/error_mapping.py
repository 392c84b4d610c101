"""Which redis-py errors heal by themselves and which no retry can fix, and the password to keep
out of their messages: what ``RedisPlumbing._translate`` needs to map them onto the contract's."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.exceptions import RedisClusterException

from storage_adapters.permanent import dns_problem

__all__ = ["CLUSTER_TRANSIENT", "cluster_unreachable", "configuration_problem", "password_of"]

#: Cluster failures that heal by themselves: the cluster is electing a new master (CLUSTERDOWN,
#: MASTERDOWN, TRYAGAIN), a slot moved or is moving (MOVED, ASK, seen on a node asked directly),
#: or no known node serves a slot yet.
CLUSTER_TRANSIENT: tuple[type[Exception], ...] = (
    redis.exceptions.ClusterDownError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
    redis.exceptions.SlotNotCoveredError,
)


def configuration_problem(exc: redis.RedisError | RedisClusterException) -> str | None:
    """Refused credentials or permissions, a database number the server does not have, or an
    unknown host: no retry can fix those."""
    if isinstance(exc, (redis.AuthenticationError, redis.exceptions.AuthorizationError)):
        return "authentication failed (wrong credentials, or the server needs some the URL lacks)"
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return "the user lacks a permission this needs (ACL)"
    if isinstance(exc, redis.ResponseError) and "DB index" in str(exc):
        return "the database number in the URL does not exist on this server"
    if isinstance(exc, RedisClusterException) and "Cluster mode is not enabled" in str(exc):
        return "the server is not a Redis Cluster node (use redis:// for a single server)"
    if isinstance(exc, redis.ConnectionError) or cluster_unreachable(exc):
        return dns_problem(exc)
    return None


def cluster_unreachable(exc: BaseException) -> bool:
    """redis-py's "no cluster node answered" (it raises it while reading the cluster's layout)."""
    return isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc)


def password_of(url: str) -> str | None:
    """The password from the userinfo or, as redis-py also accepts, a ``password`` query field."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    query = parse_qs(parts.query).get("password", [])  # parse_qs has unquoted it already
    return query[0] if query and query[0] else None
