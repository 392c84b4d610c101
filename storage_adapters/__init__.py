"""Storage adapters for parallel-scheduler: one contract (``Storage``), one module per backend.

``from_url`` picks the adapter by the URL's scheme and imports its driver only then, so a user of
one backend never needs the others' drivers to be importable.
"""

from __future__ import annotations

from .base import (
    BrowseStore,
    InstanceStore,
    JobStore,
    ListReleasingStorage,
    LockStore,
    RecurringStore,
    ReleaseStore,
    RetentionStore,
    Storage,
    StorageAdmin,
)
from .errors import (
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
from .extras import MissingExtraError, require_driver
from .records import (
    MAX_JOB_ID_LENGTH,
    ClaimedJob,
    Firing,
    InstanceRecord,
    JobQuery,
    JobRecord,
    JobState,
    LockLease,
    NewJob,
    NewRecurring,
    RecurringRecord,
    SaveMode,
    validate_job_id,
    validate_prefix,
)
from .urls import InvalidStorageURLError, mask_url, scheme_of

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_PREFIX",
    "DEFAULT_URL",
    "MAX_JOB_ID_LENGTH",
    "BrowseStore",
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
    "ListReleasingStorage",
    "LockLease",
    "LockStore",
    "MissingExtraError",
    "NewJob",
    "NewRecurring",
    "ParallelSchedulerError",
    "RecordExistsError",
    "RecordNotFoundError",
    "RecurringRecord",
    "RecurringStore",
    "ReleaseStore",
    "RetentionStore",
    "SaveMode",
    "Storage",
    "StorageAdmin",
    "StorageConfigurationError",
    "StorageError",
    "StorageUnavailableError",
    "from_url",
    "mask_url",
    "validate_job_id",
    "validate_prefix",
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
) -> Storage:
    """The adapter for ``url`` (the embedded SQLite file ``DEFAULT_URL`` when ``None``).

    ``prefix`` namespaces tables and keys so several schedulers can share one server;
    ``pool_size`` should be at least the scheduler's ``max_degree_of_parallelism``.
    ``connect_timeout`` bounds each attempt to reach a PostgreSQL or Redis server, so an
    unreachable one fails in seconds (SQLite opens a local file and needs none).
    Nothing is created until ``setup()`` is called.
    """
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
        from .sqlite import SQLiteStorage

        return SQLiteStorage(url, prefix=prefix)
    if scheme.startswith("postgres"):
        require_driver("psycopg", "PostgreSQL storage")
        from .postgresql import PostgreSQLStorage

        return PostgreSQLStorage(
            url, prefix=prefix, pool_size=pool_size, connect_timeout=connect_timeout
        )
    require_driver("redis", "Redis storage")
    from .redis import RedisStorage

    return RedisStorage(url, prefix=prefix, pool_size=pool_size, connect_timeout=connect_timeout)
