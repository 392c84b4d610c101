"""Storage adapters for parallel-scheduler: one contract (``Storage``), one module per backend.

``from_url`` picks the adapter by the URL's scheme and imports its driver only then, so a user of
one backend never needs the others' drivers to be importable.
"""

from __future__ import annotations

from .base import (
    MAX_JOB_ID_LENGTH,
    ClaimedJob,
    Firing,
    InvalidIdentifierError,
    JobRecord,
    JobState,
    ListReleasingStorage,
    LockLease,
    NewJob,
    NewRecurring,
    ParallelSchedulerError,
    RecurringRecord,
    SaveMode,
    Storage,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
    validate_job_id,
    validate_prefix,
)
from .extras import MissingExtraError, require_driver
from .urls import InvalidStorageURLError, mask_url, scheme_of

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_URL",
    "MAX_JOB_ID_LENGTH",
    "ClaimedJob",
    "Firing",
    "InvalidIdentifierError",
    "InvalidStorageURLError",
    "JobRecord",
    "JobState",
    "ListReleasingStorage",
    "LockLease",
    "MissingExtraError",
    "NewJob",
    "NewRecurring",
    "ParallelSchedulerError",
    "RecurringRecord",
    "SaveMode",
    "Storage",
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


def from_url(
    url: str | None = None, *, prefix: str = DEFAULT_PREFIX, pool_size: int = 10
) -> Storage:
    """The adapter for ``url`` (the embedded SQLite file ``DEFAULT_URL`` when ``None``).

    ``prefix`` namespaces tables and keys so several schedulers can share one server;
    ``pool_size`` should be at least the scheduler's ``max_degree_of_parallelism``.
    Nothing is created until ``setup()`` is called.
    """
    url = DEFAULT_URL if url is None else url
    scheme = scheme_of(url)
    validate_prefix(prefix)
    if scheme == "sqlite":
        from .sqlite import SQLiteStorage

        return SQLiteStorage(url, prefix=prefix)
    if scheme.startswith("postgres"):
        require_driver("psycopg", "PostgreSQL storage")
        from .postgresql import PostgreSQLStorage

        return PostgreSQLStorage(url, prefix=prefix, pool_size=pool_size)
    require_driver("redis", "Redis storage")
    from .redis import RedisStorage

    return RedisStorage(url, prefix=prefix, pool_size=pool_size)
