"""Parsing storage URLs, and masking the credentials in them before they reach a log line."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from storage_adapters.errors import StorageError

__all__ = ["InvalidStorageURLError", "mask_url", "scheme_of"]

KNOWN_SCHEMES = (
    "sqlite",
    "postgresql",
    "postgresql+psycopg",
    "postgres",
    "redis",
    "rediss",
    "redis+cluster",
    "unix",
)
#: Schemes whose host part lists several ``host:port`` nodes (checked by their adapter).
MULTI_HOST_SCHEMES = ("redis+cluster",)


class InvalidStorageURLError(StorageError, ValueError):
    """A storage URL that is malformed or names a scheme no adapter serves."""


_SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pass", "sslpassword"})


def _mask_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(key.lower() in _SECRET_QUERY_KEYS for key, _ in pairs):
        return query
    masked = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs]
    return urlencode(masked, safe="*/")


def mask_url(url: str) -> str:
    """``url`` with any password (in the user part or the query) replaced by ``***``; text
    without ``scheme://`` (a mistyped URL) still loses whatever sits between ``:`` and ``@``."""
    if isinstance(url, str) and "://" not in url and "@" in url:
        userinfo, _, rest = url.rpartition("@")
        if ":" in userinfo:
            return f"{userinfo.split(':', 1)[0]}:***@{rest}"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    masked_query = _mask_query(parts.query)
    if masked_query != parts.query:  # edit the text: urlunsplit would drop unix:///'s empty host
        url = url.replace("?" + parts.query, "?" + masked_query, 1)
        parts = parts._replace(query=masked_query)
    if parts.password is None:
        return url
    if "," in parts.netloc:  # several hosts (redis+cluster): keep them, hide the password only
        userinfo, _, hosts = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        return urlunsplit((parts.scheme, f"{user}:***@{hosts}", *parts[2:]))
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def scheme_of(url: str) -> str:
    """The URL's scheme, checked against the schemes an adapter serves."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidStorageURLError("storage URL must be a non-empty string")
    if "://" not in url:
        raise InvalidStorageURLError(
            f"malformed storage URL {mask_url(url)!r}: expected scheme://…, for example "
            "sqlite:///parallel-scheduler.db, postgresql://user@host/db, redis://host:6379/0 or "
            "redis+cluster://host1:6379,host2:6379"
        )
    scheme = url.split("://", 1)[0].lower()
    if scheme not in KNOWN_SCHEMES:
        raise InvalidStorageURLError(
            f"unknown storage URL scheme {scheme!r} in {mask_url(url)!r}; "
            f"known schemes: {', '.join(KNOWN_SCHEMES)}"
        )
    if scheme in MULTI_HOST_SCHEMES:
        return scheme  # urlsplit cannot read a port out of "h1:1,h2:2"; the adapter parses them
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        raise InvalidStorageURLError(f"malformed storage URL {mask_url(url)!r}: {exc}") from None
    return scheme
