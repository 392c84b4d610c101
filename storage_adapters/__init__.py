"""Storage adapters for parallel-scheduler: one contract (``Storage``, in ``base.py`` and
``contract/``) and one package per backend (``sql/``, ``redis/``, ``sharded/``).

``from_url`` picks the adapter by the URL's scheme and imports its driver only then, so a user of
one backend never needs the others' drivers to be importable.
"""

from __future__ import annotations

from typing import cast

from storage_adapters.base import (
    BrowseStore,
    CalendarStore,
    ChunkSend,
    ChunkSettlement,
    InstanceStore,
    JobStore,
    ListFiringStorage,
    ListReleasingStorage,
    LockStore,
    OutcomeStore,
    PauseStore,
    RateLimitStore,
    RecurringStore,
    ReleaseStore,
    RetentionStore,
    Storage,
    StorageAdmin,
    TransactionalFiringStorage,
    TransactionalReleaseStorage,
    UniqueJobStore,
)
from storage_adapters.errors import (
    InvalidArgumentError,
    InvalidIdentifierError,
    InvalidRecordError,
    ParallelSchedulerError,
    RecordExistsError,
    RecordNotFoundError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from storage_adapters.extras import MissingExtraError, require_driver
from storage_adapters.paging import list_jobs, walk_jobs
from storage_adapters.records import (
    MAX_JOB_ID_LENGTH,
    CalendarRecord,
    ClaimedJob,
    Firing,
    InstanceRecord,
    JobQuery,
    JobRecord,
    JobState,
    LockLease,
    ManualFiring,
    NewJob,
    NewRecurring,
    OutcomeEvent,
    OutcomeQuery,
    OutcomeState,
    PauseKind,
    PauseRecord,
    PlannedFiring,
    RateLimitRecord,
    RecurringRecord,
    Reservation,
    SaveMode,
    UniqueAdd,
    UniqueConflict,
    validate_job_id,
    validate_prefix,
)
from storage_adapters.shard_guard import shards_of
from storage_adapters.sharding import (
    ShardableStorage,
    check_shards,
    shard_of,
    shard_prefix,
)
from storage_adapters.urls import InvalidStorageURLError, mask_url, scheme_of

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_PREFIX",
    "DEFAULT_URL",
    "MAX_JOB_ID_LENGTH",
    "BrowseStore",
    "CalendarRecord",
    "CalendarStore",
    "ChunkSend",
    "ChunkSettlement",
    "ClaimedJob",
    "Firing",
    "InstanceRecord",
    "InstanceStore",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "InvalidRecordError",
    "InvalidStorageURLError",
    "JobQuery",
    "JobRecord",
    "JobState",
    "JobStore",
    "ListFiringStorage",
    "ListReleasingStorage",
    "LockLease",
    "LockStore",
    "ManualFiring",
    "MissingExtraError",
    "NewJob",
    "NewRecurring",
    "OutcomeEvent",
    "OutcomeQuery",
    "OutcomeState",
    "OutcomeStore",
    "ParallelSchedulerError",
    "PauseKind",
    "PauseRecord",
    "PauseStore",
    "PlannedFiring",
    "RateLimitRecord",
    "RateLimitStore",
    "RecordExistsError",
    "RecordNotFoundError",
    "RecurringRecord",
    "RecurringStore",
    "ReleaseStore",
    "Reservation",
    "RetentionStore",
    "SaveMode",
    "Storage",
    "StorageAdmin",
    "StorageConfigurationError",
    "StorageError",
    "StorageUnavailableError",
    "TransactionalFiringStorage",
    "TransactionalReleaseStorage",
    "UniqueAdd",
    "UniqueConflict",
    "UniqueJobStore",
    "from_url",
    "list_jobs",
    "mask_url",
    "shard_of",
    "shards_of",
    "validate_job_id",
    "validate_prefix",
    "walk_jobs",
]

DEFAULT_URL = "sqlite:///parallel-scheduler.db"
DEFAULT_PREFIX = "ps"
#: Seconds one attempt to reach a storage server may take (PostgreSQL: whole seconds, at least 2).
DEFAULT_CONNECT_TIMEOUT = 2.0


def from_url(
    url: str | None = None,
    *,
    prefix: str = DEFAULT_PREFIX,
    pool_size: int = 10,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    shards: int = 1,
) -> Storage:
    """The adapter for ``url`` (the embedded SQLite file ``DEFAULT_URL`` when ``None``).

    ``prefix`` namespaces tables and keys so several schedulers can share one server;
    ``pool_size`` should be at least the scheduler's ``max_degree_of_parallelism``.
    ``connect_timeout`` bounds each attempt to reach a PostgreSQL or Redis server, so an
    unreachable one fails in seconds (SQLite opens a local file and needs none).
    ``shards`` splits the store into that many shards (see sharding.py), each a store under its
    own prefix on the same server and connections; 1 is one store, exactly as without shards.
    Nothing is created until ``setup()`` is called, which also refuses a store recorded with
    another shard count.
    """
    check_shards(shards)
    prefixes = [shard_prefix(prefix, k) for k in range(shards)]  # refused before connecting
    home = _adapter(url, prefix, pool_size, connect_timeout)
    if shards == 1:
        return home
    from storage_adapters.sharded_storage import ShardedStorage

    shardable = cast(ShardableStorage, home)
    return ShardedStorage([home, *(shardable.sibling(p) for p in prefixes[1:])])


def _adapter(url: str | None, prefix: str, pool_size: int, connect_timeout: float) -> Storage:
    """The one-shard adapter for ``url``'s scheme (see ``from_url``)."""
    url = DEFAULT_URL if url is None else url
    if (
        isinstance(connect_timeout, bool)
        or not isinstance(connect_timeout, (int, float))
        or not 0 < connect_timeout <= 3600
    ):
        raise InvalidArgumentError(
            f"connect_timeout must be seconds in (0, 3600], not {connect_timeout!r}"
        )
    scheme = scheme_of(url)
    validate_prefix(prefix)
    if scheme == "sqlite":
        from storage_adapters.sql.sqlite import SQLiteStorage

        return SQLiteStorage(url, prefix=prefix)
    if scheme.startswith("postgres"):
        require_driver("psycopg", "PostgreSQL storage")
        from storage_adapters.sql.postgresql import PostgreSQLStorage

        return PostgreSQLStorage(
            url, prefix=prefix, pool_size=pool_size, connect_timeout=connect_timeout
        )
    require_driver("redis", "Redis storage")
    from storage_adapters.redis.storage import RedisStorage

    return RedisStorage(url, prefix=prefix, pool_size=pool_size, connect_timeout=connect_timeout)
