"""Opening the store the settings name: the one place settings become a ``Storage``.

``Client``, the Celery wiring (and through them the command line, the dashboard and the worker
bootstep) all open storage here, so a setting that shapes the store (``shards`` above all: a
client opened with another count than the schedulers would write jobs where none of them looks)
cannot be forgotten by one of them.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

import storage_adapters
from parallel_scheduler.settings import Settings
from storage_adapters import Storage, mask_url
from storage_adapters.urls import scheme_of

__all__ = ["SHARD_CONNECTIONS", "open_storage", "pool_size_for"]

#: With shards, each served shard's two loops peek on a connection of their own beside the
#: release pool: this many extra connections at most, however many shards there are.
SHARD_CONNECTIONS = 32


def pool_size_for(settings: Settings) -> int:
    """Connections to keep: ``max_degree_of_parallelism`` for the release pool, plus, with
    shards, two per shard (the delayed and recurring loops' peeks) up to ``SHARD_CONNECTIONS``
    (the shard stores share one connection pool)."""
    parallelism = settings.max_degree_of_parallelism
    if settings.shards == 1:
        return parallelism
    return parallelism + min(2 * settings.shards, SHARD_CONNECTIONS)


def open_storage(
    settings: Settings, *, pool_size: int | None = None, connect_timeout: float | None = None
) -> Storage:
    """The store ``settings`` name (URL, prefix, shards), not yet set up. ``pool_size`` and
    ``connect_timeout`` default to what the settings call for (``pool_size_for``,
    ``connect_timeout``)."""
    return storage_adapters.from_url(
        settings.storage_url,
        prefix=settings.prefix,
        pool_size=pool_size_for(settings) if pool_size is None else pool_size,
        connect_timeout=settings.connect_timeout if connect_timeout is None else connect_timeout,
        shards=settings.shards,
    )


def sqlite_file(url: str) -> Path | None:
    """The absolute path of an SQLite URL's file; ``None`` for other schemes."""
    if scheme_of(url) != "sqlite":
        return None
    try:
        database = sa.engine.make_url(url).database
    except sa.exc.ArgumentError:
        return None  # the adapter refuses it with its own message when it is opened
    return Path(database).absolute() if database and database != ":memory:" else None


def describe_storage(url: str) -> str:
    """``url`` with its password masked, and for SQLite the file it resolves to."""
    path = sqlite_file(url)
    return mask_url(url) if path is None else f"{mask_url(url)} (file {path})"
