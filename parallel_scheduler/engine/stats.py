"""What one scheduler pass did, counted by outcome, so callers and tests can check every job.

``SchedulerStats`` is what the shared loop (``LockedScheduler``) needs of any pass's stats;
``PassStats`` (delayed jobs) and ``RecurringPassStats`` (recurring jobs) are the two kinds, each
counting its own outcomes explicitly, field by field.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import NamedTuple, Protocol, TypeVar

__all__ = [
    "FireOutcome",
    "FireResult",
    "Outcome",
    "PassStats",
    "RecurringPassStats",
    "SchedulerStats",
    "combined",
]


class SchedulerStats(Protocol):
    """What the loop reads and writes on a pass's stats: whether the pass held the lock, whether
    it was idle (its peek found nothing due, so it took no lock and did nothing else), whether it
    failed (to back off), how long it took, and a plain dict for logs and ``--once``."""

    lock_acquired: bool
    idle: bool
    failed: int
    duration: float

    def as_dict(self) -> dict[str, object]: ...


class Outcome(str, enum.Enum):
    """What became of one due job in a delayed pass; ``PassStats`` counts each outcome.

    Its value is the name of the matching ``PassStats`` field and of the pass's JSON key
    (``run --once``, ``status --json``): ``Outcome.RELEASED.value == "released"``.
    """

    RELEASED = "released"  # sent to the worker system and marked Enqueued
    NOT_CLAIMED = "not_claimed"  # another claimer had it, or it was no longer due
    EXPIRED = "expired"  # its expiry passed before release: not sent, marked Expired
    FAILED = "failed"  # the hand-off failed: back to Scheduled, tried again later
    FENCED = "fenced"  # sent, but the claim had been recovered meanwhile: may run twice
    STOPPED = "stopped"  # left Scheduled: shutdown, lost lock or a failing dispatcher
    BACKED_OFF = "backed_off"  # this job cannot be sent: Scheduled again later, on its own
    SET_ASIDE = "set_aside"  # cannot be sent at its last attempt allowed: marked Failed
    DEFERRED = "deferred"  # over its rate limit: Scheduled again, due at its reserved slot


@dataclass
class PassStats:
    """What one delayed-job pass did (``DelayedJobScheduler.run_once()`` returns it).

    ``lock_acquired`` says whether the pass held the scheduler lock; ``idle`` that its peek found
    nothing due, so it took no lock and did nothing else. ``batches`` and ``fetched`` count the
    batches read and the job ids in them, ``recovered`` the claims of dead claimers made due
    again; every other count is one ``Outcome`` (``released``, ``not_claimed``, ``expired``,
    ``failed``, ``fenced``, ``stopped``, ``backed_off``, ``set_aside``, ``deferred``).
    ``duration`` is the
    pass's wall time in seconds.

    Example::

        stats = scheduler.run_once()
        assert stats.failed == 0, stats.as_dict()
        print(f"released {stats.released} of {stats.fetched}")
    """

    lock_acquired: bool = False
    idle: bool = False  # nothing was due: one peek, no lock (``lock_acquired`` is False)
    batches: int = 0
    fetched: int = 0
    recovered: int = 0
    released: int = 0
    not_claimed: int = 0
    expired: int = 0
    failed: int = 0
    fenced: int = 0
    stopped: int = 0
    backed_off: int = 0  # jobs that cannot be sent, due again later (not a failed pass)
    set_aside: int = 0  # jobs that cannot be sent, marked Failed at their last attempt
    deferred: int = 0  # jobs over their rate limit, due again at their reserved slot
    duration: float = 0.0

    def add_batch(self, fetched: int, outcomes: Counter[Outcome]) -> None:
        """Count one more batch: ``fetched`` job ids read, and each job's ``Outcome``.

        :param fetched: how many due job ids the batch read.
        :param outcomes: how many of its jobs ended in each outcome.
        """
        self.batches += 1
        self.fetched += fetched
        self.released += outcomes[Outcome.RELEASED]
        self.not_claimed += outcomes[Outcome.NOT_CLAIMED]
        self.expired += outcomes[Outcome.EXPIRED]
        self.failed += outcomes[Outcome.FAILED]
        self.fenced += outcomes[Outcome.FENCED]
        self.stopped += outcomes[Outcome.STOPPED]
        self.backed_off += outcomes[Outcome.BACKED_OFF]
        self.set_aside += outcomes[Outcome.SET_ASIDE]
        self.deferred += outcomes[Outcome.DEFERRED]

    def as_dict(self) -> dict[str, object]:
        """Every field by name, as plain values: what logs, ``run --once`` and ``status --json``
        show."""
        return asdict(self)


class FireOutcome(enum.Enum):
    """What became of one recurring job in a pass."""

    FIRED = "fired"  # its firings were added and its next run advanced
    STALE = "stale"  # another writer changed it first, or the lock's lease ran out
    FAILED = "failed"  # its stored schedule or next run is unusable: left as it is, reported
    PAUSED = "paused"  # its pause_after_failures was reached: paused instead of fired


class FireResult(NamedTuple):
    """One recurring job's part of a pass: its outcome and the firing jobs it accounts for."""

    outcome: FireOutcome
    created: int = 0  # firing jobs created
    existed: int = 0  # firing jobs that existed already (a repeated attempt at a tick)
    missed: int = 0  # ticks late by more than the misfire grace
    skipped: int = 0  # ticks not fired while an earlier firing ran (the job's overlap policy)


@dataclass
class RecurringPassStats:
    lock_acquired: bool = False
    idle: bool = False  # nothing was due: one peek, no lock (``lock_acquired`` is False)
    batches: int = 0
    fetched: int = 0
    fired: int = 0  # recurring jobs that advanced
    created: int = 0  # firing jobs created
    existed: int = 0  # firing jobs that existed already (a repeated attempt at a tick)
    stale: int = 0  # another writer changed the recurring job first
    missed: int = 0  # ticks late by more than the misfire grace
    skipped: int = 0  # ticks held back by overlap: skipped, or collapsed into a buffered one
    failed: int = 0
    paused: int = 0  # recurring jobs paused after their pause_after_failures failed firings
    planned: int = 0  # recurring jobs of the coming tick planned ahead (written at the tick)
    from_plan: int = 0  # recurring jobs fired at their tick from a plan made before it
    duration: float = 0.0

    def add(self, result: FireResult) -> None:
        self.created += result.created
        self.existed += result.existed
        self.missed += result.missed
        self.skipped += result.skipped
        if result.outcome is FireOutcome.FIRED:
            self.fired += 1
        elif result.outcome is FireOutcome.STALE:
            self.stale += 1
        elif result.outcome is FireOutcome.PAUSED:
            self.paused += 1
        else:
            self.failed += 1

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


StatsT = TypeVar("StatsT", PassStats, RecurringPassStats)


def combined(passes: Sequence[StatsT], duration: float) -> StatsT:
    """The passes of one run over several shards as one: counts summed, the lock taken and idle
    only if so on every shard, and ``duration`` the run's own (the shards ran side by side)."""
    first = passes[0]
    totals = {
        f.name: sum(getattr(p, f.name) for p in passes)
        for f in fields(first)
        if f.name not in ("lock_acquired", "idle", "duration")
    }
    return replace(
        first,
        **totals,
        lock_acquired=all(p.lock_acquired for p in passes),
        idle=all(p.idle for p in passes),
        duration=duration,
    )
