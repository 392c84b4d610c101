"""Which shard stores a storage has, and the check every write path makes first: that the
store's recorded shard count is the one this process was opened with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from storage_adapters.base import Storage
from storage_adapters.errors import StorageConfigurationError
from storage_adapters.sharded_storage import ShardedStorage
from storage_adapters.sharding import ShardableStorage, check_shard_count

__all__ = ["shards_of", "verify_shard_count"]


def verify_shard_count(storage: Storage) -> None:
    """Refuse (``StorageConfigurationError``) to write to a store recorded with another shard
    count than ``storage`` has, reading the record only (nothing is created).

    A write path calls this once before its first write: a client opened with 8 shards on a
    4-shard store would otherwise put jobs where no 4-shard process ever looks. A store without
    a record is a one-shard store; a sharded ``storage`` needs its count recorded by ``setup()``.
    """
    shards = shards_of(storage)
    home = shards[0]
    if not hasattr(home, "stored_shard_count"):
        return  # an adapter that cannot be sharded is one store
    stored = cast(ShardableStorage, home).stored_shard_count()
    prefix = getattr(home, "prefix", getattr(home, "_prefix", "?"))
    if stored is None and len(shards) > 1:
        raise StorageConfigurationError(
            f"the store under prefix {prefix!r} has no recorded shard count, but this process "
            f"was opened with shards={len(shards)}: call setup() once (or run a scheduler) "
            "with that count before writing, or open it with shards=1"
        )
    if (stored or 1) != len(shards):
        check_shard_count(home, len(shards), prefix)


def shards_of(storage: Storage) -> Sequence[Storage]:
    """The shard stores of ``storage`` in shard order: ``[storage]`` when it has one shard."""
    if isinstance(storage, ShardedStorage):
        return storage.shards
    return [storage]
