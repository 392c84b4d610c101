"""Redis adapter: one hash per job, sorted-set indexes by time, one Lua script per state change.

Every key is ``{prefix}:…``. The braces are a Redis Cluster hash tag, so all keys of one scheduler
share a slot and every multi-key step can run as a single atomic script; the scripts read "now"
with ``TIME`` so every host agrees on what is due. Floats travel as round-trippable strings.

Keys: ``schedule`` (SCHEDULED ids by due time: the due set), ``state:<state>`` (the other states
by due time), ``all`` (every id by due time), ``claimed`` (claimed ids by lease end),
``job:<id>`` (hash), ``lock:<name>`` (hash with a TTL), ``fence:<name>`` (fencing counter),
``finished:<state>`` (finished ids by finish time, for retention: ``redis/retention.py``).
Browsing pages through these indexes (``redis/browse.py``).
Recurring jobs (``rec:<id>``, ``rec_ids``, ``rec_due``) live in ``redis/recurring.py``, reading and
managing jobs in ``redis/jobs.py``, the lock in ``redis/locks.py``: one mixin per contract family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.exceptions import RedisClusterException

from storage_adapters.checks.values import (
    RECOVERED_REASON,
    check_new_jobs,
    error_text,
    positive_count,
)
from storage_adapters.errors import (
    InvalidArgumentError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from storage_adapters.permanent import dns_problem
from storage_adapters.records import ClaimedJob, JobState, LockLease, NewJob, validate_prefix
from storage_adapters.redis.browse import BROWSE_SCRIPTS, RedisBrowse
from storage_adapters.redis.instances import INSTANCE_SCRIPTS, RedisInstances
from storage_adapters.redis.jobs import RedisJobs, float_arg, lease_arg
from storage_adapters.redis.link import RedisLink, parse_target
from storage_adapters.redis.locks import RedisLocks
from storage_adapters.redis.recurring import RECURRING_SCRIPTS, RedisRecurring
from storage_adapters.redis.retention import RETENTION_SCRIPTS, RedisRetention
from storage_adapters.sharding import check_shard_count, check_shards
from storage_adapters.urls import InvalidStorageURLError, mask_url

__all__ = ["RedisStorage"]

#: 2: finished jobs are indexed by finish time (``finished:<state>``, see redis/retention.py).
SCHEMA_VERSION = 2
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
    "list_jobs",
    "acquire_lock",
    "renew_lock",
    "release_lock",
    "lock_holder",
    *RECURRING_SCRIPTS,
    *RETENTION_SCRIPTS,
    *INSTANCE_SCRIPTS,
    *BROWSE_SCRIPTS,
)
#: Scripts that only read: the others are writes, which ``wait_replicas`` makes wait for replicas.
_READING_SCRIPTS = frozenset(
    {
        "due_ids",
        "list_jobs",
        "lock_holder",
        "due_recurring",
        "list_recurring",
        "list_instances",
        "list_jobs_page",
        "finished_counts",
    }
)
#: Cluster failures that heal by themselves: the cluster is electing a new master (CLUSTERDOWN,
#: MASTERDOWN, TRYAGAIN), a slot moved or is moving (MOVED, ASK, seen on a node asked directly),
#: or no known node serves a slot yet.
_CLUSTER_TRANSIENT: tuple[type[Exception], ...] = (
    redis.exceptions.ClusterDownError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
    redis.exceptions.SlotNotCoveredError,
)
_CLAIM_WIDTH = 6  # id, task, payload, due_at, attempts, envelope per claimed job in a reply


@cache
def _script_source(name: str) -> str:
    """The script with the shared helpers in front: Redis scripts cannot include one another."""
    folder = resources.files("storage_adapters.redis").joinpath("lua")
    common = folder.joinpath("_common.lua").read_text(encoding="utf-8")
    return common + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")


def _claims(flat: Sequence[Any], token: int) -> list[ClaimedJob]:
    """Claimed jobs from a script's flat reply of ``_CLAIM_WIDTH`` fields per job."""
    return [
        ClaimedJob(
            id=flat[i],
            task=flat[i + 1],
            payload=flat[i + 2],
            due_at=float(flat[i + 3]),
            attempts=int(flat[i + 4]),
            token=token,
            envelope=flat[i + 5] or None,
        )
        for i in range(0, len(flat), _CLAIM_WIDTH)
    ]


class RedisStorage(
    RedisJobs, RedisLocks, RedisRecurring, RedisRetention, RedisInstances, RedisBrowse
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
        self._password = _password_of(url)
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

    def _attach(self, link: RedisLink, prefix: str, *, owns_link: bool) -> None:
        self._link = link
        self._prefix = validate_prefix(prefix)
        self._owns_link = owns_link
        self._closed = False
        #: The shard count ``setup()`` expects to find recorded (see sharding.py); a
        #: ``ShardedStorage`` sets it on its first shard before setting it up.
        self.expected_shards = 1

    def sibling(self, prefix: str) -> RedisStorage:
        """Another storage on this one's client and connection pools, under ``prefix`` (on a
        cluster: another slot, usually another master; shards use this). Closing the sibling
        only ends the sibling; closing this storage (the one made from a URL) closes the shared
        client, after which its siblings refuse to work."""
        if self._closed or self._link.closed:
            raise StorageError(f"{self!r} is closed")
        other = object.__new__(type(self))
        other._password = self._password
        other._masked_url = self._masked_url
        other._attach(self._link, prefix, owns_link=False)
        return other

    @property
    def clustered(self) -> bool:
        """On a Redis Cluster: then no broker shares this storage's node, and the one-script
        release (``release_to_lists``) is never available."""
        return self._link.clustered

    @property
    def _scripts(self) -> dict[str, Any]:
        return self._link.scripts

    @property
    def _db(self) -> int:
        """The database number of a single server (0 on a cluster)."""
        return self._link.db

    def __repr__(self) -> str:
        return f"RedisStorage({self._masked_url!r}, prefix={self._prefix!r})"

    # -- plumbing ---------------------------------------------------------------------------

    def _key(self, rest: str) -> str:
        return f"{{{self._prefix}}}:{rest}"

    def _state_key(self, state: JobState) -> str:
        return self._key("schedule" if state is JobState.SCHEDULED else f"state:{state.value}")

    def _scrub(self, text: object) -> str:
        """``mask_url`` misses a password given as a query field, and messages may quote one."""
        text = str(text)
        return text.replace(self._password, "***") if self._password else text

    @contextmanager
    def _talking(self) -> Iterator[Any]:
        """Turn driver errors into the contract's errors, naming the server but not its password.
        Yields the client: ``redis.Redis``, or ``redis.cluster.RedisCluster`` on a cluster."""
        if self._closed or self._link.closed:
            raise StorageError(f"{self!r} is closed")
        try:
            yield self._link.client()
        except (redis.RedisError, RedisClusterException) as exc:
            if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, *_CLUSTER_TRANSIENT)):
                self._link.refresh()  # a node asked directly may be gone: find the new master
            raise self._translate(exc) from exc

    def _translate(self, exc: redis.RedisError | RedisClusterException) -> StorageError:
        """Permanent problems first (they arrive as connection errors too), then what may heal:
        a dropped or refused connection, a timeout, a replica after a failover (ReadOnlyError:
        retrying reaches the new primary), a server still loading its data, a cluster electing
        a new master or moving a slot, a cluster none of whose nodes answers now."""
        detail = f"{type(exc).__name__}: {self._scrub(exc)}"
        problem = _configuration_problem(exc)
        if problem is not None:
            return StorageConfigurationError(
                f"Redis at {self._masked_url} cannot be used: {problem} ({detail})"
            )
        transient = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)
        if isinstance(exc, (*transient, *_CLUSTER_TRANSIENT)) or _cluster_unreachable(exc):
            return StorageUnavailableError(
                f"Redis at {self._masked_url} is unavailable: {self._scrub(exc)}"
            )
        return StorageError(f"Redis at {self._masked_url} failed: {detail}")

    def _run(self, script: str, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        with self._talking() as client:
            return self._call(client, script, keys, args)

    def _call(
        self, client: Any, script: str, keys: Sequence[str], args: Sequence[str | int]
    ) -> Any:
        """Run a script (inside ``_talking``); a writing one waits for replicas when the URL
        asks (``wait_replicas``)."""
        runnable = self._scripts[script]
        if self._link.target.wait_replicas and script not in _READING_SCRIPTS:
            return self._replicated(lambda pipe: runnable(keys=keys, args=args, client=pipe))
        return runnable(keys=keys, args=args, client=client)

    def _replicated(self, queue: Callable[[Any], object]) -> Any:
        """The reply of the write ``queue`` puts into a pipeline, sent with ``WAIT`` right after
        it on the same connection to the master of this prefix's slot (``WAIT`` counts the
        replicas that have this connection's writes). Fewer acknowledgements than
        ``wait_replicas`` within ``wait_timeout_ms`` fail the call: the write is done on the
        master but may be lost if the master dies before its replica has it."""
        target = self._link.target
        pipe = self._link.owner(self._key("version")).pipeline(transaction=False)
        queue(pipe)
        pipe.execute_command("WAIT", target.wait_replicas, target.wait_timeout_ms)
        reply, acknowledged = pipe.execute(raise_on_error=False)
        for outcome in (reply, acknowledged):
            if isinstance(outcome, Exception):
                raise outcome
        if int(acknowledged) < target.wait_replicas:
            raise StorageUnavailableError(
                f"Redis at {self._masked_url}: only {acknowledged} of {target.wait_replicas} "
                f"replicas acknowledged a write within {target.wait_timeout_ms} ms; it is done on "
                "the master but a failover now could lose it"
            )
        return reply

    def _on_owner(self, client: Any, *command: str | int) -> Any:
        """A command for the node that owns this prefix's slot (the server itself off-cluster)."""
        if not self.clustered:
            return client.execute_command(*command)
        return client.execute_command(*command, target_nodes=self._owner_node())

    def _owner_node(self) -> Any:
        return self._link.owner_node(self._key("version"))

    def _job_keys(self) -> list[str]:
        """The keys ``add_job`` in lua/_common.lua writes: the all-jobs index and the due set."""
        return [self._key("all"), self._key("schedule")]

    def _job_args(self, jobs: Sequence[NewJob]) -> list[str]:
        """Checked jobs as the ARGV tail ``add_job`` reads (add_jobs and fire_recurring share it):
        the job key prefix, then id, task, payload, due_at, envelope ('' for none) per job."""
        check_new_jobs(jobs)  # every due_at is a finite number: ``float_arg`` without the check
        args = [self._key("job:")]
        for job in jobs:
            args += (job.id, job.task, job.payload, repr(float(job.due_at)), job.envelope or "")
        return args

    def _claiming(
        self, script: str, lock: LockLease, lease: float, what: str | int
    ) -> list[ClaimedJob]:
        """Both claim scripts check the lease and answer with flat rows, payload included."""
        keys = [
            self._key(f"lock:{lock.name}"),
            self._key("schedule"),
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
        ]
        args = [self._key("job:"), lock.owner, str(lock.token), lease_arg(lease), what]
        return _claims(self._run(script, keys, args), lock.token)

    # -- set-up and clock -------------------------------------------------------------------

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
        if stored < SCHEMA_VERSION:  # keys written by schema 1: index its finished jobs once
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

    def now(self) -> float:
        """The ``TIME`` of the node the scripts run on (on a cluster: the master of this prefix's
        slot), so "now" here is the scripts' "now"."""
        with self._talking() as client:
            seconds, micros = self._on_owner(client, "TIME")
        return int(seconds) + int(micros) / 1_000_000

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

    # -- accept -----------------------------------------------------------------------------

    def add_jobs(self, jobs: Sequence[NewJob]) -> list[bool]:
        args = self._job_args(jobs)
        if not jobs:
            return []
        return [bool(flag) for flag in self._run("add_jobs", self._job_keys(), args)]

    # -- release ----------------------------------------------------------------------------

    def fetch_due_ids(self, limit: int) -> list[str]:
        return list(self._run("due_ids", [self._key("schedule")], [positive_count("limit", limit)]))

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        found = self._claiming("claim", lock, lease, job_id)
        return found[0] if found else None

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        return self._claiming("claim_due", lock, lease, positive_count("limit", limit))

    def server_identity(self) -> str:
        """The server's ``run_id``: equal for two connections exactly when they reach the same
        Redis process, whatever host names or addresses led there. On a cluster,
        ``redis-cluster:`` and the run_id of the master of this prefix's slot: no broker's
        identity (a bare run_id) equals it, since no broker shares a cluster node's lists."""
        with self._talking() as client:
            run_id = str(self._on_owner(client, "INFO", "server")["run_id"])
        return f"redis-cluster:{run_id}" if self.clustered else run_id

    def release_to_lists(
        self, limit: int, lock: LockLease, lease: float, list_db: int
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """One script: due jobs with an envelope go onto their broker list in database
        ``list_db`` of this server and are Enqueued; the others are claimed. Returns
        ``(moved, claimed)``, each earliest due first."""
        if isinstance(list_db, bool) or not isinstance(list_db, int) or list_db < 0:
            raise InvalidArgumentError(f"list_db must be a database number, not {list_db!r}")
        if self.clustered:
            raise StorageError(
                "release_to_lists is not available on a Redis Cluster: no broker shares the node "
                "of this prefix's slot (the scheduler releases by claim and send there)"
            )
        keys = [
            self._key(f"lock:{lock.name}"),
            self._key("schedule"),
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            self._state_key(JobState.ENQUEUED),
            self._finished_key(JobState.ENQUEUED),
        ]
        args: list[str | int] = [
            self._key("job:"),
            lock.owner,
            str(lock.token),
            lease_arg(lease),
            positive_count("limit", limit),
            list_db,
            self._db,
        ]
        reply = self._run("release_to_lists", keys, args)
        rows = _claims(reply[1:], lock.token)
        return rows[: int(reply[0])], rows[int(reply[0]) :]

    def _settle(
        self, claims: Sequence[ClaimedJob], target: JobState, error: str | None
    ) -> list[str]:
        if not claims:
            return []
        keys = [self._key("claimed"), self._state_key(JobState.CLAIMED), self._state_key(target)]
        if target.is_terminal:
            keys.append(self._finished_key(target))
        args = [self._key("job:"), target.value, "0" if error is None else "1", error or ""]
        for claim in claims:
            args += (claim.id, str(claim.token))
        return list(self._run("settle", keys, args))

    def mark_enqueued(self, claims: Sequence[ClaimedJob]) -> list[str]:
        return self._settle(claims, JobState.ENQUEUED, None)

    def unclaim(self, claims: Sequence[ClaimedJob], error: str | None = None) -> list[str]:
        return self._settle(claims, JobState.SCHEDULED, error)

    def expire(self, claims: Sequence[ClaimedJob], reason: str) -> list[str]:
        return self._settle(claims, JobState.EXPIRED, reason)

    def back_off(self, claims: Sequence[ClaimedJob], error: str, delay: float) -> list[str]:
        return self._set_aside(claims, error, float_arg("delay", delay, positive=True))

    def fail(self, claims: Sequence[ClaimedJob], error: str) -> list[str]:
        return self._set_aside(claims, error, "")

    def _set_aside(self, claims: Sequence[ClaimedJob], error: str, delay: str) -> list[str]:
        """``lua/set_aside.lua``: due again ``delay`` seconds from now, or failed (``''``)."""
        error = error_text(error)
        if not claims:
            return []
        keys = [
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            self._key("schedule"),
            self._state_key(JobState.FAILED),
            self._key("all"),
        ]
        args = [self._key("job:"), error, delay]
        for claim in claims:
            args += (claim.id, str(claim.token))
        return list(self._run("set_aside", keys, args))

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        keys = [self._key("claimed"), self._state_key(JobState.CLAIMED), self._key("schedule")]
        args: list[str | int] = [
            self._key("job:"),
            positive_count("limit", limit),
            RECOVERED_REASON,
        ]
        return int(self._run("recover", keys, args))

    def next_due_at(self) -> float | None:
        with self._talking() as client:
            first = client.zrange(self._key("schedule"), 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def next_work_at(self) -> float | None:
        """The heads of the due set and of the claim leases (scored by lease end), read in one
        MULTI/EXEC: one round trip, one snapshot."""
        with self._talking() as client:
            pipe = client.pipeline(transaction=True)
            pipe.zrange(self._key("schedule"), 0, 0, withscores=True)
            pipe.zrange(self._key("claimed"), 0, 0, withscores=True)
            heads = pipe.execute()
        return min((float(head[0][1]) for head in heads if head), default=None)


def _configuration_problem(exc: redis.RedisError | RedisClusterException) -> str | None:
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
    if isinstance(exc, redis.ConnectionError) or _cluster_unreachable(exc):
        return dns_problem(exc)
    return None


def _cluster_unreachable(exc: BaseException) -> bool:
    """redis-py's "no cluster node answered" (it raises it while reading the cluster's layout)."""
    return isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc)


def _password_of(url: str) -> str | None:
    """The password from the userinfo or, as redis-py also accepts, a ``password`` query field."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    query = parse_qs(parts.query).get("password", [])  # parse_qs has unquoted it already
    return query[0] if query and query[0] else None
