"""Redis adapter: one hash per job, sorted-set indexes by time, one Lua script per state change.

Every key is ``{prefix}:…``. The braces are a Redis Cluster hash tag, so all keys of one scheduler
share a slot and every multi-key step can run as a single atomic script; the scripts read "now"
with ``TIME`` so every host agrees on what is due. Floats travel as round-trippable strings.

Keys: ``schedule`` (SCHEDULED ids by due time: the due set), ``state:<state>`` (the other states
by due time), ``all`` (every id by due time), ``claimed`` (claimed ids by lease end),
``job:<id>`` (hash), ``lock:<name>`` (hash with a TTL), ``fence:<name>`` (fencing counter),
``finished:<state>`` (finished ids by finish time, for retention: ``redis_retention.py``).
Browsing pages through these indexes (``redis_browse.py``).
Recurring jobs (``rec:<id>``, ``rec_ids``, ``rec_due``) live in ``redis_recurring.py``, reading and
managing jobs in ``redis_jobs.py``, the lock in ``redis_locks.py``: one mixin per contract family.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.commands.core import Script

from .checks import (
    RECOVERED_REASON,
    check_new_jobs,
    positive_count,
)
from .errors import (
    InvalidArgumentError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from .permanent import dns_problem
from .records import (
    ClaimedJob,
    JobState,
    LockLease,
    NewJob,
    validate_prefix,
)
from .redis_browse import BROWSE_SCRIPTS, RedisBrowse
from .redis_instances import INSTANCE_SCRIPTS, RedisInstances
from .redis_jobs import RedisJobs, float_arg, lease_arg
from .redis_locks import RedisLocks
from .redis_recurring import RECURRING_SCRIPTS, RedisRecurring
from .redis_retention import RETENTION_SCRIPTS, RedisRetention
from .urls import InvalidStorageURLError, mask_url

__all__ = ["RedisStorage"]

#: 2: finished jobs are indexed by finish time (``finished:<state>``, see redis_retention.py).
SCHEMA_VERSION = 2
MIN_SERVER_VERSION = (6, 2)  # ZRANGE … BYSCORE LIMIT
POOL_WAIT_SECONDS = 30.0  # how long a caller queues for a free connection before giving up
#: A reply can take this long (a release script over a big chunk) before the link counts as lost.
SOCKET_TIMEOUT_SECONDS = 30.0
# Each name is lua/<name>.lua; lua/_common.lua is put in front of every one of them.
_SCRIPTS = (
    "add_jobs",
    "claim",
    "claim_due",
    "release_to_lists",
    "settle",
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
_CLAIM_WIDTH = 6  # id, task, payload, due_at, attempts, envelope per claimed job in a reply


@cache
def _script_source(name: str) -> str:
    """The script with the shared helpers in front: Redis scripts cannot include one another."""
    folder = resources.files("storage_adapters").joinpath("lua")
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
    """The ``Storage`` contract on one Redis >= 6.2 server (the key layout is cluster-ready).

    Connections are not retried inside redis-py: a timed-out script may still have run, and
    replaying a claim or an accept would misreport it. Errors surface as
    ``StorageUnavailableError`` so the scheduler's own retry decides.
    """

    def __init__(
        self, url: str, *, prefix: str = "ps", pool_size: int = 10, connect_timeout: float = 2.0
    ) -> None:
        self._prefix = validate_prefix(prefix)
        positive_count("pool_size", pool_size)
        self._password = _password_of(url)
        self._masked_url = self._scrub(mask_url(url))
        try:
            self._pool = redis.BlockingConnectionPool.from_url(
                url,
                max_connections=pool_size + 2,
                timeout=POOL_WAIT_SECONDS,
                decode_responses=True,
                socket_connect_timeout=connect_timeout,
                socket_timeout=max(SOCKET_TIMEOUT_SECONDS, connect_timeout),
            )
        except ValueError as exc:
            raise InvalidStorageURLError(
                f"invalid Redis URL {self._masked_url!r}: {self._scrub(exc)}"
            ) from None
        self._client = redis.Redis(connection_pool=self._pool)
        self._db = int(self._pool.connection_kwargs.get("db") or 0)
        self._scripts: dict[str, Script] = {
            name: self._client.register_script(_script_source(name)) for name in _SCRIPTS
        }
        self._closed = False

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
    def _talking(self) -> Iterator[redis.Redis]:
        """Turn driver errors into the contract's errors, naming the server but not its password."""
        if self._closed:
            raise StorageError(f"{self!r} is closed")
        try:
            yield self._client
        except redis.RedisError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: redis.RedisError) -> StorageError:
        """Permanent problems first (they arrive as connection errors too), then what may heal:
        a dropped or refused connection, a timeout, a replica after a failover (ReadOnlyError:
        retrying reaches the new primary), a server still loading its data."""
        detail = f"{type(exc).__name__}: {self._scrub(exc)}"
        problem = _configuration_problem(exc)
        if problem is not None:
            return StorageConfigurationError(
                f"Redis at {self._masked_url} cannot be used: {problem} ({detail})"
            )
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)):
            return StorageUnavailableError(
                f"Redis at {self._masked_url} is unavailable: {self._scrub(exc)}"
            )
        return StorageError(f"Redis at {self._masked_url} failed: {detail}")

    def _run(self, script: str, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        with self._talking():
            return self._scripts[script](keys=keys, args=args)

    def _job_keys(self) -> list[str]:
        """The keys ``add_job`` in lua/_common.lua writes: the all-jobs index and the due set."""
        return [self._key("all"), self._key("schedule")]

    def _job_args(self, jobs: Sequence[NewJob]) -> list[str]:
        """Checked jobs as the ARGV tail ``add_job`` reads (add_jobs and fire_recurring share it):
        the job key prefix, then id, task, payload, due_at, envelope ('' for none) per job."""
        check_new_jobs(jobs)
        args = [self._key("job:")]
        for job in jobs:
            due_at = float_arg("due_at", job.due_at)
            args += (job.id, job.task, job.payload, due_at, job.envelope or "")
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

    def _check_server_version(self, client: redis.Redis) -> None:
        try:
            version = str(client.info("server").get("redis_version", ""))
        except redis.ResponseError:
            return  # INFO is disabled on some managed services; the scripts will fail loudly.
        parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if len(parts) == 2 and parts < MIN_SERVER_VERSION:
            wanted = ".".join(map(str, MIN_SERVER_VERSION))
            raise StorageError(
                f"Redis at {self._masked_url} is version {version}; parallel-scheduler "
                f"needs Redis >= {wanted}"
            )

    def now(self) -> float:
        with self._talking() as client:
            seconds, micros = client.time()
        return seconds + micros / 1_000_000

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()
            self._pool.disconnect()

    def drop(self) -> None:
        pattern = "\\{" + self._prefix + "\\}:*"
        with self._talking() as client:
            batch: list[str] = []
            for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    client.unlink(*batch)
                    batch.clear()
            if batch:
                client.unlink(*batch)

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
        Redis process, whatever host names or addresses led there."""
        with self._talking() as client:
            return str(client.info("server")["run_id"])

    def release_to_lists(
        self, limit: int, lock: LockLease, lease: float, list_db: int
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """One script: due jobs with an envelope go onto their broker list in database
        ``list_db`` of this server and are Enqueued; the others are claimed. Returns
        ``(moved, claimed)``, each earliest due first."""
        if isinstance(list_db, bool) or not isinstance(list_db, int) or list_db < 0:
            raise InvalidArgumentError(f"list_db must be a database number, not {list_db!r}")
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


def _configuration_problem(exc: redis.RedisError) -> str | None:
    """Refused credentials or permissions, a database number the server does not have, or an
    unknown host: no retry can fix those."""
    if isinstance(exc, (redis.AuthenticationError, redis.exceptions.AuthorizationError)):
        return "authentication failed (wrong credentials, or the server needs some the URL lacks)"
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return "the user lacks a permission this needs (ACL)"
    if isinstance(exc, redis.ResponseError) and "DB index" in str(exc):
        return "the database number in the URL does not exist on this server"
    if isinstance(exc, redis.ConnectionError):
        return dns_problem(exc)
    return None


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
