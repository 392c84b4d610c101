"""Retention on Redis: the part of ``RedisStorage`` that deletes old finished jobs
(``RetentionStore`` in ``base.py``).

Keys: ``finished:<state>`` (enqueued, cancelled, expired) holds the ids in that state scored by
the time they reached it. The scripts that finish a job (settle, cancel, release_to_lists) add it
there, so the oldest finished jobs are one range read away, never a SCAN. ``purge_finished.lua``
deletes a bounded batch: the hash, and the id from every index (``all``, the state index, the
finished index, and, in case, the schedule and the claim leases).

Jobs finished under schema 1 (before these indexes existed) are indexed once, when ``setup``
moves the prefix's ``version`` to 2 (in slices of ``BACKFILL_SLICE`` ids, so no script blocks
the server); they are purged from then on like any other. A process of the old version still
running during the upgrade may finish jobs without indexing them: those stay until purged by
hand (``parallel-scheduler purge`` goes through the same indexes, so delete them with the old
tools, or run ``setup`` again after resetting ``version`` to 1).
"""

from __future__ import annotations

from collections.abc import Iterable

from storage_adapters.checks.retention import PURGEABLE_STATES, check_purge
from storage_adapters.records import JobState
from storage_adapters.redis.jobs import float_arg
from storage_adapters.redis.plumbing import RedisPlumbing

__all__ = ["BACKFILL_SLICE", "RETENTION_SCRIPTS", "RedisRetentionStore"]

#: The scripts (lua/<name>.lua) this mixin runs; the host loads them with its own.
RETENTION_SCRIPTS = ("purge_finished", "index_finished")
BACKFILL_SLICE = 1000


class RedisRetentionStore(RedisPlumbing):
    """Deleting old finished jobs in bounded batches, for ``RedisStorage`` to inherit."""

    def purge_finished(
        self, states: Iterable[JobState | str], older_than: float, limit: int
    ) -> int:
        chosen, cutoff, count = check_purge(states, older_than, limit)
        keys = [self._key("all"), self._key("schedule"), self._key("claimed")]
        for state in chosen:
            keys += (self._finished_key(state), self._state_key(state))
        args: list[str | int] = [
            self._key("job:"),
            float_arg("older_than", cutoff),
            count,
            *(state.value for state in chosen),
        ]
        return int(self._run("purge_finished", keys, args))

    def _index_finished_jobs(self) -> None:
        """Index finished jobs stored before the finished indexes existed (see above)."""
        for state in PURGEABLE_STATES:
            keys = [self._state_key(state), self._finished_key(state)]
            first = 0
            while True:
                seen = int(
                    self._run("index_finished", keys, [self._key("job:"), first, BACKFILL_SLICE])
                )
                first += seen
                if seen < BACKFILL_SLICE:
                    break
