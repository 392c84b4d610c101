"""Redis adapter: one hash per job, sorted-set indexes by time, one Lua script per state change.

Every key is ``{prefix}:…``. The braces are a Redis Cluster hash tag, so all keys of one scheduler
share a slot and every multi-key step can run as a single atomic script; the scripts read "now"
with ``TIME`` so every host agrees on what is due. Floats travel as round-trippable strings.

Keys: ``schedule`` (SCHEDULED ids by due time: the due set), ``state:<state>`` (the other states
by due time), ``all`` (every id by due time), ``claimed`` (claimed ids by lease end),
``job:<id>`` (hash), ``lock:<name>`` (hash with a TTL), ``fence:<name>`` (fencing counter),
``finished:<state>`` (finished ids by finish time, for retention: ``redis/retention.py``),
``oc:<id>``, ``outcomes:*`` and ``outcome_counts`` (execution outcomes: ``redis/outcomes.py``),
``pauses`` (the pauses in force; their held jobs are ``state:held``: ``redis/pauses.py``),
``unique`` (which job holds each task's unique key: ``redis/unique.py``), ``limits`` (the rate
limits in force and their reserved slots: ``redis/rate_limits.py``), ``calendars`` (calendars
of excluded dates: ``redis/calendars.py``).
Browsing pages through these indexes (``redis/browse.py``).
Recurring jobs (``rec:<id>``, ``rec_ids``, ``rec_due``) live in ``redis/recurring.py``, accepting
and managing jobs in ``redis/jobs.py``, the release hand-off in ``redis/release.py``, the lock in
``redis/locks.py``: one mixin per contract family, each on the plumbing of ``redis/plumbing.py``.
This module holds what makes them one storage: construction, set-up, closing and the shard count.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis

from storage_adapters.checks.values import positive_count
from storage_adapters.errors import StorageError
from storage_adapters.records import validate_prefix
from storage_adapters.redis.browse import BROWSE_SCRIPTS, RedisBrowseStore
from storage_adapters.redis.calendars import RedisCalendarStore
from storage_adapters.redis.error_mapping import password_of
from storage_adapters.redis.instances import INSTANCE_SCRIPTS, RedisInstanceStore
from storage_adapters.redis.jobs import RedisJobStore
from storage_adapters.redis.link import RedisLink, parse_target
from storage_adapters.redis.locks import RedisLockStore
from storage_adapters.redis.outcomes import OUTCOME_SCRIPTS, RedisOutcomeStore
from storage_adapters.redis.pauses import PAUSE_SCRIPTS, RedisPauseStore
from storage_adapters.redis.rate_limits import RATE_LIMIT_SCRIPTS, RedisRateLimitStore
from storage_adapters.redis.recurring import RECURRING_SCRIPTS, RedisRecurringStore
from storage_adapters.redis.release import RedisReleaseStore
from storage_adapters.redis.retention import RETENTION_SCRIPTS, RedisRetentionStore
from storage_adapters.redis.unique import UNIQUE_SCRIPTS, RedisUniqueJobStore
from storage_adapters.sharding import check_shard_count, check_shards
from storage_adapters.urls import InvalidStorageURLError, mask_url

__all__ = ["RedisStorage"]

#: 2: finished jobs are indexed by finish time (``finished:<state>``, see redis/retention.py).
#: 3: execution outcomes (``oc:<id>``, ``outcomes:*``, ``outcome_counts``: redis/outcomes.py),
#: which an older version would not purge with their jobs.
SCHEMA_VERSION = 3
#: The first version whose finished jobs are indexed (older ones are indexed once at set-up).
_FINISHED_INDEXED_SINCE = 2
MIN_SERVER_VERSION = (6, 2)  # ZRANGE … BYSCORE LIMIT
# Each name is lua/<name>.lua; lua/_common.lua is put in front of every one of them.
_SCRIPTS = (
    "add_jobs",
    "claim",
    "claim_due",
    "release_to_lists",
    "settle",
    "set_aside",
    "recover",
    "cancel",
    "reschedule",
    "due_ids",
    "acquire_lock",
    "renew_lock",
    "release_lock",
    "lock_holder",
    *RECURRING_SCRIPTS,
    *RETENTION_SCRIPTS,
    *INSTANCE_SCRIPTS,
    *BROWSE_SCRIPTS,
    *OUTCOME_SCRIPTS,
    *PAUSE_SCRIPTS,
    *UNIQUE_SCRIPTS,
    *RATE_LIMIT_SCRIPTS,
)


@cache
def _script_source(name: str) -> str:
    """The script with the shared helpers in front: Redis scripts cannot include one another."""
    folder = resources.files("storage_adapters.redis").joinpath("lua")
    common = folder.joinpath("_common.lua").read_text(encoding="utf-8")
    return common + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")


class RedisStorage(
    RedisJobStore,
    RedisReleaseStore,
    RedisLockStore,
    RedisRecurringStore,
    RedisRetentionStore,
    RedisInstanceStore,
    RedisBrowseStore,
    RedisOutcomeStore,
    RedisPauseStore,
    RedisUniqueJobStore,
    RedisRateLimitStore,
    RedisCalendarStore,
):
    """The ``Storage`` contract on one Redis >= 6.2 server, or on a Redis Cluster
    (``redis+cluster://host:port,host:port``: see ``redis/link.py`` for the URL and its options).

    On a cluster every key of a prefix is in the slot of ``{prefix}``, so each script, ``TIME``
    (``now``), ``SCAN`` (``drop``) and ``WAIT`` run on the one master that owns that slot: a
    prefix's clock is the clock of the node its scripts run on. Another prefix (``sibling``) is
    another slot, usually on another master.

    Connections are not retried inside redis-py: a timed-out script may still have run, and
    replaying a claim or an accept would misreport it. Errors surface as
    ``StorageUnavailableError`` so the scheduler's own retry decides.
    """

    def __init__(
        self, url: str, *, prefix: str = "ps", pool_size: int = 10, connect_timeout: float = 2.0
    ) -> None:
        validate_prefix(prefix)
        positive_count("pool_size", pool_size)
        self._password = password_of(url)
        self._masked_url = self._scrub(mask_url(url))
        try:
            link = RedisLink(
                parse_target(url),
                {name: _script_source(name) for name in _SCRIPTS},
                pool_size,
                connect_timeout,
            )
        except InvalidStorageURLError as exc:
            raise InvalidStorageURLError(self._scrub(exc)) from None
        self._attach(link, prefix, owns_link=True)

    # -- set-up and closing -----------------------------------------------------------------

    def setup(self) -> None:
        with self._talking() as client:
            self._check_server_version(client)
            client.set(self._key("version"), SCHEMA_VERSION, nx=True)
            stored = int(client.get(self._key("version")) or SCHEMA_VERSION)
            # Pre-loading makes the first claim one round trip instead of NOSCRIPT + load + retry.
            if self.clustered:  # SCRIPT LOAD goes to every master; a new master loads on NOSCRIPT
                for script in self._scripts.values():
                    client.script_load(script.script)
            else:
                pipe = client.pipeline(transaction=False)
                for script in self._scripts.values():
                    pipe.script_load(script.script)
                pipe.execute()
        if stored > SCHEMA_VERSION:
            raise StorageError(
                f"keys under prefix {self._prefix!r} were written by a newer parallel-scheduler "
                f"(schema {stored}, this one understands {SCHEMA_VERSION}); upgrade it"
            )
        if stored < SCHEMA_VERSION:
            if stored < _FINISHED_INDEXED_SINCE:  # keys written by schema 1: index them once
                self._index_finished_jobs()
            with self._talking() as client:
                client.set(self._key("version"), SCHEMA_VERSION)
        check_shard_count(self, self.expected_shards, self._prefix)

    def _check_server_version(self, client: Any) -> None:
        """Every node of a cluster, since any of them may come to own this prefix's slot."""
        try:
            if self.clustered:
                from redis.cluster import RedisCluster

                infos = list(client.info("server", target_nodes=RedisCluster.ALL_NODES).values())
            else:
                infos = [client.info("server")]
        except redis.ResponseError:
            return  # INFO is disabled on some managed services; the scripts will fail loudly.
        for info in infos:
            version = str(info.get("redis_version", ""))
            parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
            if len(parts) == 2 and parts < MIN_SERVER_VERSION:
                wanted = ".".join(map(str, MIN_SERVER_VERSION))
                raise StorageError(
                    f"Redis at {self._masked_url} is version {version}; parallel-scheduler "
                    f"needs Redis >= {wanted}"
                )

    def close(self) -> None:
        """Closing a sibling ends only the sibling; closing the storage made from the URL also
        closes the client its siblings share."""
        if not self._closed:
            self._closed = True
            if self._owns_link:
                self._link.close()

    def drop(self) -> None:
        """SCAN the node that owns this prefix's slot (every key of the prefix is there) and
        unlink what matches, in batches."""
        pattern = "\\{" + self._prefix + "\\}:*"
        with self._talking():
            node = self._link.owner(self._key("version"))
            batch: list[str] = []
            for key in node.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self._unlink(node, batch)
                    batch.clear()
            if batch:
                self._unlink(node, batch)

    def _unlink(self, node: Any, keys: list[str]) -> None:
        if self._link.target.wait_replicas:
            self._replicated(lambda pipe: pipe.unlink(*keys))
        else:
            node.unlink(*keys)

    # -- shard count (for the sharding layer; not part of the Storage contract) ------------

    def exists(self) -> bool:
        """Whether ``setup()`` ever ran under this prefix (its version key exists); reads only."""
        with self._talking() as client:
            return bool(client.exists(self._key("version")))

    def stored_shard_count(self) -> int | None:
        """The shard count stored under this prefix (``{prefix}:shards``), ``None`` if none."""
        with self._talking() as client:
            stored = client.get(self._key("shards"))
        return None if stored is None else int(stored)

    def store_shard_count(self, shards: int) -> int:
        """Record ``shards`` under this prefix (``{prefix}:shards``) unless a count is recorded
        already; return the recorded one."""
        check_shards(shards)
        key = self._key("shards")
        with self._talking() as client:
            if self._link.target.wait_replicas:
                self._replicated(lambda pipe: pipe.set(key, shards, nx=True))
            else:
                client.set(key, shards, nx=True)
            return int(client.get(key))
