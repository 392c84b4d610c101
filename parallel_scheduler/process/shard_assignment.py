"""Which shards this scheduler process serves, when the store is split into ``shards`` (S > 1).

Every live scheduler process computes the whole assignment from the same input, the set of live
instance ids, so they agree without talking to each other: no coordinator, no extra lock.

The assignment is rendezvous (highest-random-weight) hashing with bounded load. Every pair
(instance, shard) has a weight, a hash of both (BLAKE2b: the same in every process and Python
version, unlike ``hash()``). Taking the pairs from the heaviest down, a shard goes to the pair's
instance unless the shard is taken or the instance is full. With N instances, each may take
``S // N`` shards, and the first ``S % N`` to reach that may take one more; the capacities add
up to S, so every shard is taken and every instance ends with ``floor(S/N)`` or ``ceil(S/N)``:

* **deterministic**: a function of the set of ids alone (not of their order, nor of who asks);
* **fair**: floor or ceil of S/N each;
* **stable**: a steady set keeps its assignment, and an instance joining or leaving moves the
  shards it must take or give (about S/N) plus some among the others (the capacities shrink or
  grow by one): within 2.5 times the unavoidable minimum, about 1.3 times on average over random
  (S, N), never a reshuffle of everything (tests/unit/test_shard_assignment.py checks it against
  a brute-force minimum).

Liveness (``live_ids``): an instance is live while its heartbeat, on the storage clock, is at
most ``liveness_threshold(settings)`` old, ``max(lock_lease / 2, 2 * heartbeat_interval)``: two
intervals, so one late or lost heartbeat does not hand its shards away and back (no flapping),
and half a lease, so that its shards are reassigned before its own locks run out. This process
always counts itself live. So the shards of a process that died or was stopped (SIGSTOP) are
assigned to the others within ``threshold + heartbeat_interval`` (they notice at their next
heartbeat): 7 s with the defaults (10 s lease, 2 s heartbeat), and served from then on, or from
when the dead process's lock lease runs out if it died in a pass: a shard is unserved for at
most about one lock lease plus a poll interval, as a single scheduler's take-over. A graceful stop
removes the record, and the others take its shards at their next heartbeat. A stopped process
that resumes keeps acting on its old assignment only until its next heartbeat (its locks have
run out meanwhile and are fenced), then computes the same assignment as everyone: it is live
again and gets its share back, which the others give up at their own next heartbeat.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from storage_adapters import InstanceRecord

if TYPE_CHECKING:
    from parallel_scheduler.settings import Settings

__all__ = [
    "ShardAssignment",
    "assign",
    "describe_shards",
    "live_ids",
    "liveness_threshold",
    "shards_for",
]


def _weight(instance: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{instance}\x00{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(shards: int, instances: Iterable[str]) -> dict[str, frozenset[int]]:
    """Every instance's shards: disjoint, covering ``range(shards)``, floor or ceil of S/N each.

    Ties in weight (vanishingly rare with 64-bit hashes) are broken by instance id and shard, so
    the result depends on the set of ids alone."""
    ids = sorted(set(instances))
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    if not ids:
        return {}
    base, extra = divmod(shards, len(ids))
    pairs = sorted(
        (
            (_weight(instance, shard), instance, shard)
            for instance in ids
            for shard in range(shards)
        ),
        reverse=True,
    )
    owned: dict[str, set[int]] = {instance: set() for instance in ids}
    taken: set[int] = set()
    for _, instance, shard in pairs:
        if shard in taken:
            continue
        load = len(owned[instance])
        if load == base and extra > 0:
            extra -= 1
        elif load >= base:
            continue
        owned[instance].add(shard)
        taken.add(shard)
        if len(taken) == shards:
            break
    return {instance: frozenset(mine) for instance, mine in owned.items()}


def shards_for(instance: str, shards: int, live: Iterable[str]) -> frozenset[int]:
    """The shards ``instance`` serves among ``live`` (itself counted live in any case)."""
    return assign(shards, {*live, instance})[instance]


def describe_shards(shards: Iterable[int]) -> str:
    """``0-3,7,9-10``: a set of shard numbers, short, for logs and ``status``; ``-`` if none."""
    ordered = sorted(set(shards))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts) or "-"


def liveness_threshold(settings: Settings) -> float:
    """How old a heartbeat may be (storage clock) for its instance to count as live; see the
    module docstring for why, and the take-over bound it gives."""
    return max(settings.lock_lease / 2, 2 * settings.heartbeat_interval)


def live_ids(
    records: Iterable[InstanceRecord], now: float, threshold: float, me: str
) -> frozenset[str]:
    """The ids of the records whose heartbeat is at most ``threshold`` old at ``now``, and
    ``me``: this process is live while it asks, whatever its record says."""
    live = {record.id for record in records if now - record.heartbeat_at <= threshold}
    live.add(me)
    return frozenset(live)


class ShardAssignment:
    """This process's current shards, updated from the heartbeat's view of the live set.

    Read from every shard's loop thread (``serves``), written from the heartbeat thread
    (``update``). Starts with every shard (alone, until the first view of the others: the
    service asks storage for that view before its loops start). ``on_change`` is called with
    (before, after) whenever the served set changes, outside the guard."""

    def __init__(
        self,
        shards: int,
        me: str,
        on_change: Callable[[frozenset[int], frozenset[int]], None] | None = None,
    ) -> None:
        self.shards = shards
        self.me = me
        #: Called with (before, after) when the served set changes; the service sets it.
        self.on_change = on_change
        self._guard = threading.Lock()
        self._live: frozenset[str] = frozenset({me})
        self._served: frozenset[int] = frozenset(range(shards))

    @property
    def served(self) -> frozenset[int]:
        """The shards this process serves now."""
        return self._served  # one reference read: atomic

    @property
    def live(self) -> frozenset[str]:
        """The live instance ids the current assignment was computed from."""
        return self._live

    def serves(self, shard: int) -> bool:
        return shard in self._served

    def update(self, live: Iterable[str]) -> bool:
        """Recompute from ``live`` (this process is added); True when the served set changed.
        A set equal to the last one costs nothing: the assignment is only computed on change."""
        ids = frozenset({*live, self.me})
        with self._guard:
            if ids == self._live:
                return False
            before = self._served
            after = shards_for(self.me, self.shards, ids)
            self._live, self._served = ids, after
        if after != before and self.on_change is not None:
            self.on_change(before, after)
        return after != before
