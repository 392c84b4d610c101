"""What the tests of shard counts share (their fixtures ``adapter_url`` and ``four_shards`` are in
tests/conftest.py): dropping every shard a test created, and read-only checks of what exists
under a prefix."""

from __future__ import annotations

import redis
import sqlalchemy as sa

import storage_adapters
from storage_adapters.sharding import shard_prefix


def drop_shards(url: str, prefix: str, shards: int = 8) -> None:
    """Drop the stores of shards 0..``shards``-1 under ``prefix`` (any that exist)."""
    for shard in range(shards):
        leftover = storage_adapters.from_url(url, prefix=shard_prefix(prefix, shard))
        leftover.drop()
        leftover.close()


def exists(url: str, prefix: str) -> bool:
    """Whether anything of the store under ``prefix`` exists (tables or keys), read only."""
    if url.startswith("redis"):
        client = redis.Redis.from_url(url)
        try:
            return any(True for _ in client.scan_iter(match=f"{{{prefix}}}:*", count=1000))
        finally:
            client.close()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
        return any(name.startswith(f"{prefix}_") for name in names)
    finally:
        engine.dispose()


def assert_nothing_written(url: str, prefix: str) -> None:
    """The 4-shard store under ``prefix`` holds no job and no shard 4..7 was created."""
    store = storage_adapters.from_url(url, prefix=prefix, shards=4)
    try:
        assert not any(store.count_by_state().values())
    finally:
        store.close()
    for shard in range(4, 8):
        assert not exists(url, shard_prefix(prefix, shard)), shard
