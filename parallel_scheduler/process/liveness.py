"""Liveness: every scheduler process keeps a record of itself in storage, so an operator (and
``parallel-scheduler status``) can tell at any moment how many schedulers are alive, which one
holds each lock, what each did last, and with which settings.

``Heartbeat`` is a daemon thread that ``SchedulerService`` starts with its schedulers: it
registers the process (its id is the schedulers' lock owner, so a lock holder in storage names
its record), rewrites the record every ``heartbeat_interval`` seconds (storage stamps the time
with its own clock), and removes it on a graceful stop. A process that dies without stopping
leaves a record whose heartbeat ages: shown dead once it is ``DEAD_AFTER_INTERVALS`` intervals
old, deleted ``REMOVE_AFTER`` seconds after its last heartbeat by any live instance's heartbeat.

With shards (``shards`` > 1), the heartbeat also tells the process which shards to serve: each
beat reads the instance records once (one more round trip per interval, none per pass), and
hands the ids of the live ones to ``on_live`` (``shard_assignment.ShardAssignment.update``). The
record's details say which shards the process serves (``shards``; ``[0]`` without shards).

The details' ``last_held`` says, per lock (``delayed-scheduler``, ``delayed-scheduler#3``), when
this process's last pass under it ended, on the storage clock: ``status`` names the active
instance of a free lock by it, so a process that only peeks is never the active one. ``locks``
is what the process held at the beat; ``status`` shows storage's word instead, which a dead
process's record cannot outlive.

A storage error in a heartbeat is logged and the next interval tries again: liveness reporting
never stops the scheduling it reports on.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from parallel_scheduler.clock import ClockSource
from parallel_scheduler.process.shard_assignment import live_ids, liveness_threshold
from parallel_scheduler.version import __version__
from storage_adapters import InstanceRecord, InstanceStore

if TYPE_CHECKING:
    from parallel_scheduler.engine.locked_loop import LockedScheduler
    from parallel_scheduler.settings import Settings

__all__ = ["DEAD_AFTER_INTERVALS", "REMOVE_AFTER", "Heartbeat", "pass_view"]

logger = logging.getLogger(__name__)
#: A record whose heartbeat is older than this many of its own intervals is shown dead.
DEAD_AFTER_INTERVALS = 3
#: Seconds after its last heartbeat that a dead record is deleted.
REMOVE_AFTER = 600.0
#: Dead records deleted per heartbeat at most (one bounded statement or script).
REMOVE_BATCH = 100


def pass_view(
    scheduler: LockedScheduler[Any] | Sequence[LockedScheduler[Any]],
) -> dict[str, Any] | None:
    """The scheduler's last pass that held its lock or was idle (``idle``: nothing was due):
    when it ended, how long it took, and its counts (``released`` for delayed jobs,
    ``fired``/``created`` for recurring ones). Given one scheduler per shard, the latest pass
    of any of them, with its ``shard``."""
    schedulers = [scheduler] if not isinstance(scheduler, Sequence) else scheduler
    passes = [(*last, s.shard) for s in schedulers if (last := s.last_pass) is not None]
    if not passes:
        return None
    ended_at, stats, shard = max(passes, key=lambda item: item[0])
    view = {"at": ended_at, "duration_seconds": round(stats.duration, 6), **stats.as_dict()}
    if shard is not None:
        view["shard"] = shard
    return view


class LivenessStore(InstanceStore, ClockSource, Protocol):
    """What liveness needs of storage: the instance records and the clock that stamps them."""


class Heartbeat:
    """Registers this process, keeps its record fresh, and removes it on ``stop()``."""

    def __init__(
        self,
        storage: LivenessStore,
        instance_id: str,
        settings: Settings,
        schedulers: Mapping[str, LockedScheduler[Any] | Sequence[LockedScheduler[Any]]],
        *,
        served: Callable[[], Collection[int]] = lambda: (0,),
        on_live: Callable[[frozenset[str]], object] | None = None,
    ) -> None:
        """``schedulers``: by kind, the scheduler, or one per shard. ``served``: the shards this
        process serves now, for the details. ``on_live``: given the live instance ids after
        every beat that could read them (only then is the records' list read)."""
        self.storage = storage
        self.instance_id = instance_id
        self.settings = settings
        self.interval = settings.heartbeat_interval
        self._schedulers = {
            kind: [s] if not isinstance(s, Sequence) else list(s) for kind, s in schedulers.items()
        }
        self._served = served
        self._on_live = on_live
        self._started_at = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Epoch seconds of the last heartbeat storage accepted (``None`` before the first);
        #: what a metrics gauge or a health check reads.
        self.last_beat: float | None = None

    def details(self) -> str:
        """The record's JSON details: last passes, when each lock was last held, locks held now,
        settings (passwords masked)."""
        locks = []
        last_held = {}
        for schedulers in self._schedulers.values():
            for scheduler in schedulers:
                held = scheduler.held
                if held is not None and held.valid():
                    locks.append(scheduler.lock_label)
                if scheduler.last_held_at is not None:
                    last_held[scheduler.lock_label] = round(scheduler.last_held_at, 6)
        view = {
            "last_pass": {kind: pass_view(s) for kind, s in self._schedulers.items()},
            "last_held": dict(sorted(last_held.items())),
            "locks": sorted(locks),
            "shards": sorted(self._served()),
            "settings": self.settings.describe(),
        }
        return json.dumps(view, default=str, allow_nan=False)

    def record(self) -> InstanceRecord:
        return InstanceRecord(
            id=self.instance_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=__version__,
            started_at=self._started_at,
            heartbeat_at=0.0,  # stamped by storage
            details=self.details(),
        )

    def beat(self) -> bool:
        """Write the record once (registering again if it was removed meanwhile) and delete dead
        records; ``False`` when storage failed (logged; the next interval tries again). With
        ``on_live``, first read the live instances and hand them over, so the record written
        says the shards served from now on."""
        try:
            now = self.storage.now()
            self.look_around(now)
            if not self.storage.heartbeat_instance(self.instance_id, self.details()):
                self.storage.register_instance(self.record())
            self.last_beat = time.time()
            cutoff = now - REMOVE_AFTER
            removed = self.storage.remove_instances_older_than(cutoff, REMOVE_BATCH)
            if removed:
                logger.info(
                    "removed %d scheduler instance(s) dead for %.0f s", removed, REMOVE_AFTER
                )
        except Exception as exc:  # any failure: liveness must not stop the schedulers
            logger.warning("heartbeat of scheduler %s failed: %s", self.instance_id, exc)
            return False
        return True

    def look_around(self, now: float | None = None) -> None:
        """Read the instance records and hand the live ids to ``on_live`` (nothing without it).
        Raises what storage raises (the caller logs it)."""
        if self._on_live is None:
            return
        now = self.storage.now() if now is None else now
        records = self.storage.list_instances()
        threshold = liveness_threshold(self.settings)
        self._on_live(live_ids(records, now, threshold, self.instance_id))

    def start(self) -> None:
        """Register now (in the caller's thread, so the record exists once ``start`` returns
        when storage is up) and keep beating in a daemon thread. With ``on_live``, the live
        instances are read first, so the registered record already says this process's share."""
        if self._thread is not None:
            return
        self._stop.clear()
        try:
            self.look_around()
            self.storage.register_instance(self.record())
            self.last_beat = time.time()
        except Exception as exc:
            logger.warning("registering scheduler %s failed: %s", self.instance_id, exc)
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        """Stop beating and remove the record: a graceful stop is not a death."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        try:
            self.storage.remove_instance(self.instance_id)
        except Exception as exc:  # it ages out and is removed as dead
            logger.warning("removing scheduler %s failed: %s", self.instance_id, exc)
