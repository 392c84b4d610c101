"""The plumbing every family of ``RedisStorage`` inherits (as the SQL families inherit
``SQLPlumbing``): the key layout, running a script (waiting for replicas when the URL asks),
driver errors as the contract's errors, the server's clock and the job encoding the scripts share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
from redis.exceptions import RedisClusterException

from storage_adapters.checks.values import check_new_jobs
from storage_adapters.errors import (
    InvalidArgumentError,
    StorageConfigurationError,
    StorageError,
    StorageUnavailableError,
)
from storage_adapters.records import JobState, NewJob, validate_prefix
from storage_adapters.redis.error_mapping import (
    CLUSTER_TRANSIENT,
    cluster_unreachable,
    configuration_problem,
)
from storage_adapters.redis.link import RedisLink

__all__ = ["RedisPlumbing", "job_fields"]

#: Scripts that only read: the others are writes, which ``wait_replicas`` makes wait for replicas.
_READING_SCRIPTS = frozenset(
    {
        "due_ids",
        "lock_holder",
        "due_recurring",
        "list_recurring",
        "list_instances",
        "list_jobs_page",
        "finished_counts",
        "outcome_rows",
        "outcomes_page",
        "list_rate_limits",
    }
)

_PlumbingT = TypeVar("_PlumbingT", bound="RedisPlumbing")


def job_fields(jobs: Sequence[NewJob]) -> list[str]:
    """Jobs checked by ``check_new_jobs`` as ``add_job`` in lua/_common.lua reads them: id, task,
    payload, due_at, envelope, queue ('' for none) per job."""
    fields: list[str] = []
    for job in jobs:
        fields += (
            job.id,
            job.task,
            job.payload,
            repr(float(job.due_at)),
            job.envelope or "",
            job.queue or "",
        )
    return fields


class RedisPlumbing:
    """One prefix's keys on the server or cluster a ``RedisLink`` reaches, and the ways to run a
    command or script on them; ``RedisStorage`` builds the contract on it."""

    #: Set by ``RedisStorage.__init__`` from the URL: what ``_scrub`` hides, what errors name.
    _password: str | None
    _masked_url: str

    def _attach(self, link: RedisLink, prefix: str, *, owns_link: bool) -> None:
        self._link = link
        self._prefix = validate_prefix(prefix)
        self._owns_link = owns_link
        self._closed = False
        #: The shard count ``setup()`` expects to find recorded (see sharding.py); a
        #: ``ShardedStorage`` sets it on its first shard before setting it up.
        self.expected_shards = 1

    def sibling(self: _PlumbingT, prefix: str) -> _PlumbingT:
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

    def _broker_db(self, list_db: int, what: str) -> int:
        """``list_db`` checked for a script that pushes onto a broker's lists on this server:
        a database number, and never on a cluster (no broker shares a cluster node's lists)."""
        if isinstance(list_db, bool) or not isinstance(list_db, int) or list_db < 0:
            raise InvalidArgumentError(f"list_db must be a database number, not {list_db!r}")
        if self.clustered:
            raise StorageError(
                f"{what} is not available on a Redis Cluster: no broker shares the node of this "
                "prefix's slot (the scheduler releases by claim and send there)"
            )
        return list_db

    def __repr__(self) -> str:
        return f"RedisStorage({self._masked_url!r}, prefix={self._prefix!r})"

    # -- key layout -------------------------------------------------------------------------

    def _key(self, rest: str) -> str:
        return f"{{{self._prefix}}}:{rest}"

    def _state_key(self, state: JobState) -> str:
        return self._key("schedule" if state is JobState.SCHEDULED else f"state:{state.value}")

    def _finished_key(self, state: JobState) -> str:
        """The index of ``state``'s jobs by the time they reached it (finished states only)."""
        return self._key(f"finished:{state.value}")

    # -- talking to the server --------------------------------------------------------------

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
            if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, *CLUSTER_TRANSIENT)):
                self._link.refresh()  # a node asked directly may be gone: find the new master
            raise self._translate(exc) from exc

    def _translate(self, exc: redis.RedisError | RedisClusterException) -> StorageError:
        """Permanent problems first (they arrive as connection errors too), then what may heal:
        a dropped or refused connection, a timeout, a replica after a failover (ReadOnlyError:
        retrying reaches the new primary), a server still loading its data, a cluster electing
        a new master or moving a slot, a cluster none of whose nodes answers now."""
        detail = f"{type(exc).__name__}: {self._scrub(exc)}"
        problem = configuration_problem(exc)
        if problem is not None:
            return StorageConfigurationError(
                f"Redis at {self._masked_url} cannot be used: {problem} ({detail})"
            )
        transient = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)
        if isinstance(exc, (*transient, *CLUSTER_TRANSIENT)) or cluster_unreachable(exc):
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

    def now(self) -> float:
        """The ``TIME`` of the node the scripts run on (on a cluster: the master of this prefix's
        slot), so "now" here is the scripts' "now"."""
        with self._talking() as client:
            seconds, micros = self._on_owner(client, "TIME")
        return int(seconds) + int(micros) / 1_000_000

    # -- the job encoding accepting and firing share ----------------------------------------

    def _job_keys(self) -> list[str]:
        """The keys a script storing new jobs uses (``add_job`` in lua/_common.lua): the all-jobs
        index, the due set, the pauses and the held set."""
        return [self._key("all"), self._key("schedule"), *self._pause_keys()]

    def _pause_keys(self) -> list[str]:
        """The pauses and the held set: what a script that may make a job due needs besides its
        own keys, to hold the job instead when a pause matches it (redis/pauses.py)."""
        return [self._key("pauses"), self._state_key(JobState.HELD)]

    def _job_args(self, jobs: Sequence[NewJob]) -> list[str]:
        """Checked jobs as the ARGV tail ``add_job`` reads (add_jobs and the firings share it):
        the job key prefix, then id, task, payload, due_at, envelope, queue ('' for none) per job.
        """
        check_new_jobs(jobs)  # every due_at is a finite number: ``float_arg`` without the check
        return [self._key("job:"), *job_fields(jobs)]
