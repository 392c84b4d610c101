"""The release hand-off on Redis (``ReleaseStore``: claim, settle, recover, and the one-script
release onto a broker's lists) for ``RedisStorage`` to inherit, each step one fenced script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage_adapters.checks.values import RECOVERED_REASON, error_text, positive_count
from storage_adapters.records import ClaimedJob, JobState, LockLease
from storage_adapters.redis.jobs import float_arg, lease_arg
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["RedisReleaseStore"]

#: id, task, payload, due_at, attempts, envelope, queue, slot_at per claimed job in a reply
_CLAIM_WIDTH = 8


def _claims(flat: Sequence[Any], token: int) -> list[ClaimedJob]:
    """Claimed jobs from a script's flat reply of ``_CLAIM_WIDTH`` fields per job ('' for no
    envelope, queue or slot_at)."""
    return [
        ClaimedJob(
            id=flat[i],
            task=flat[i + 1],
            payload=flat[i + 2],
            due_at=float(flat[i + 3]),
            attempts=int(flat[i + 4]),
            token=token,
            envelope=flat[i + 5] or None,
            queue=flat[i + 6] or None,
            slot_at=float(flat[i + 7]) if flat[i + 7] else None,
        )
        for i in range(0, len(flat), _CLAIM_WIDTH)
    ]


class RedisReleaseStore(RedisPlumbing):
    """Claim due jobs, settle or recover the claims, release onto lists, for ``RedisStorage``."""

    def fetch_due_ids(self, limit: int) -> list[str]:
        return list(self._run("due_ids", [self._key("schedule")], [positive_count("limit", limit)]))

    def claim(self, job_id: str, lock: LockLease, lease: float) -> ClaimedJob | None:
        found = self._claiming("claim", lock, lease, job_id)
        return found[0] if found else None

    def claim_due(self, limit: int, lock: LockLease, lease: float) -> list[ClaimedJob]:
        return self._claiming("claim_due", lock, lease, positive_count("limit", limit))

    def _claiming(
        self, script: str, lock: LockLease, lease: float, what: str | int
    ) -> list[ClaimedJob]:
        """Both claim scripts check the lease and answer with flat rows, payload included."""
        keys = [
            self._key(f"lock:{lock.name}"),
            self._key("schedule"),
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            *self._pause_keys(),
        ]
        args = [self._key("job:"), lock.owner, str(lock.token), lease_arg(lease), what]
        return _claims(self._run(script, keys, args), lock.token)

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
        list_db = self._broker_db(list_db, "release_to_lists")
        keys = [
            self._key(f"lock:{lock.name}"),
            self._key("schedule"),
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            self._state_key(JobState.ENQUEUED),
            self._finished_key(JobState.ENQUEUED),
            *self._pause_keys(),
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
        elif target is JobState.SCHEDULED:  # given back: held instead when a pause matches
            keys += self._pause_keys()
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
            *self._pause_keys(),
        ]
        args = [self._key("job:"), error, delay]
        for claim in claims:
            args += (claim.id, str(claim.token))
        return list(self._run("set_aside", keys, args))

    def recover_expired_claims(self, limit: int = 10_000) -> int:
        keys = [
            self._key("claimed"),
            self._state_key(JobState.CLAIMED),
            self._key("schedule"),
            *self._pause_keys(),
        ]
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
