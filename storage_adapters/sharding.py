"""Shards: one store split into S complete stores, so that many schedulers release at once.

Each shard is a whole store of its own under its own prefix (``shard_prefix``): on Redis its own
hash tag, so its keys share one Cluster slot and shards spread over the masters; in SQL its own
tables in the same database and connection pool, like a list partition per shard. Each has its
own due index and its own locks with their own fencing tokens, so the seed's shape holds per
shard: one lock -> a batch of the lowest scores -> a bounded pool taking a lock per job. Shard 0
is the store under the prefix itself: a store with one shard is exactly today's store, and shard
0 keeps what belongs to the whole store (the scheduler instances, the recorded shard count).

A job lives in shard ``shard_of(id, S)``: CRC-32 of its shard key modulo S, the same in every
process and every release. The shard key is the id, except for a recurring firing
(``<recurring id>@<UTC time>Z``, see parallel_scheduler/firing_ids.py), whose key is its
recurring job's id: a firing is written in the same step as its recurring job's next run, so
both must live in one shard (one Redis slot, one script).

The shard count is recorded in shard 0 the first time a sharded store is set up, and ``setup()``
refuses a process opened with any other count: a client with the wrong count would write jobs
where no scheduler looks, which would lose them silently.
"""

from __future__ import annotations

import re
import uuid
import zlib
from typing import TYPE_CHECKING, Protocol

from storage_adapters.errors import (
    InvalidArgumentError,
    InvalidIdentifierError,
    StorageConfigurationError,
)
from storage_adapters.records import validate_prefix

if TYPE_CHECKING:
    from storage_adapters.base import Storage

__all__ = [
    "FIRING_ID_SUFFIX",
    "MAX_SHARDS",
    "SHARDS_META",
    "ShardableStorage",
    "check_shard_count",
    "check_shards",
    "refuse_one_shard_jobs",
    "shard_key",
    "shard_of",
    "shard_prefix",
]

#: The most shards a store may have: far more than schedulers one store can keep busy.
MAX_SHARDS = 1024
#: The name under which shard 0 records the shard count.
SHARDS_META = "shards"
#: The tail of a recurring firing's id (``@2026-11-30T02:00:00Z`` or ``@trigger-...``): what
#: makes an id a firing's, for its shard key here and for the ids callers may not choose.
FIRING_ID_SUFFIX = re.compile(r"@(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|trigger-[^@]*)\Z")


def check_shards(shards: int) -> int:
    """``shards`` if it is a valid shard count (1 to ``MAX_SHARDS``)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgumentError(
            f"shards must be an integer from 1 to {MAX_SHARDS}, not {shards!r}"
        )
    return shards


def shard_key(job_id: str) -> str:
    """What decides ``job_id``'s shard: the recurring job's id for a firing, else the id."""
    match = FIRING_ID_SUFFIX.search(job_id)
    return job_id[: match.start()] if match else job_id


def shard_of(job_id: str, shards: int) -> int:
    """The shard of ``job_id`` among ``shards`` (0-based); stable across processes."""
    if shards == 1:
        return 0
    # surrogatepass: an id no job can have (a lone surrogate) still has a shard, to be not found in
    return zlib.crc32(shard_key(job_id).encode("utf-8", "surrogatepass")) % shards


def unique_shard(task: str, unique_key: str, shards: int) -> int:
    """The shard that keeps ``unique_key`` of ``task`` (``UniqueJobStore``): the one its job
    must live in, so that the key and the job change in one step."""
    if shards == 1:
        return 0
    text = f"{task}\n{unique_key}"  # neither may hold a newline (their checks refuse one)
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % shards


def unique_job_id(task: str, unique_key: str, shards: int) -> str:
    """A new random id (a UUID) for a unique job that lands in its key's shard: drawn again
    until it does, about ``shards`` draws on average."""
    wanted = unique_shard(task, unique_key, shards)
    while True:
        candidate = str(uuid.uuid4())
        if shard_of(candidate, shards) == wanted:
            return candidate


def shard_prefix(prefix: str, shard: int) -> str:
    """The prefix of shard ``shard``: the store's own for shard 0, ``<prefix>_s<k>`` after."""
    if shard == 0:
        return prefix
    name = f"{prefix}_s{shard}"
    try:
        return validate_prefix(name)
    except InvalidIdentifierError:
        raise InvalidIdentifierError(
            f"prefix {prefix!r} is too long to name shard {shard} ({name!r}): "
            "use a prefix of at most 35 characters with shards"
        ) from None


class ShardableStorage(Protocol):
    """What an adapter offers beyond ``Storage`` to be split into shards."""

    #: The shard count ``setup()`` expects to find recorded: 1 unless a ``ShardedStorage`` set
    #: it on its shard 0.
    expected_shards: int

    def sibling(self, prefix: str) -> Storage:
        """The store under another prefix on the same server and connections."""

    def stored_shard_count(self) -> int | None:
        """The recorded shard count; ``None`` when none was (a store of one shard)."""

    def store_shard_count(self, shards: int) -> int:
        """Record ``shards`` unless a count is recorded already; return the recorded one."""


def check_shard_count(store: Storage, expected: int, prefix: str) -> None:
    """Refuse to use a store set up with another shard count (``setup()`` calls this on shard 0).

    A store set up without shards records nothing and reads as one shard. The first set-up with
    S > 1 records S, but only on a store that is still empty: the jobs of a one-shard store
    would otherwise sit where S shards no longer look for them.
    """
    stored = store.stored_shard_count()  # type: ignore[attr-defined]
    if stored is None and expected > 1:
        refuse_one_shard_jobs(store, expected, prefix)
        stored = store.store_shard_count(expected)  # type: ignore[attr-defined]
    if (stored or 1) != expected:
        raise StorageConfigurationError(
            f"the store under prefix {prefix!r} is split into {stored or 1} shard(s), but this "
            f"process was opened with shards={expected}: every scheduler and client of one store "
            f"must use the same count (set shards={stored or 1}, or PARALLEL_SCHEDULER_SHARDS). "
            "To change the count, start a new prefix and let this one drain (docs: Running many "
            "schedulers, Changing the shard count)"
        )


def refuse_one_shard_jobs(store: Storage, expected: int, prefix: str) -> None:
    """Refuse to split a one-shard store that already holds jobs or recurring jobs: they would
    sit where ``expected`` shards no longer look for them."""
    if any(store.count_by_state().values()) or store.count_recurring():
        raise StorageConfigurationError(
            f"the store under prefix {prefix!r} already holds jobs kept in one shard; it "
            f"cannot be opened with shards={expected}. Use a new prefix for the sharded "
            "store and let a one-shard scheduler drain this one (docs: Running many "
            "schedulers, Changing the shard count)"
        )
