"""Checking a repetition before its time is kept: every job released exactly once, none lost.

A fast pass that lost jobs, or sent some twice, is not a result; it is a bug. So after each
repetition (warm-ups included) the profile gathers four independent views and requires them to
agree: the pass's own stats, the ids the dispatcher saw, the storage's states and ids, and (with a
real broker) the number of messages that arrived in the queue. Any disagreement stops the run
before a single figure is printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from parallel_scheduler.engine.stats import PassStats
from parallel_scheduler.profiling.errors import VerificationError
from storage_adapters import JobState

__all__ = ["Observation", "problems", "verify"]

EXAMPLES = 3
_MUST_BE_ZERO = ("not_claimed", "expired", "failed", "fenced", "stopped")


@dataclass(frozen=True)
class Observation:
    """What one repetition left behind.

    ``expected``: this repetition's ids. ``stored_ids``/``all_ids``: the ENQUEUED ids in storage
    and every id the cell has added so far (earlier repetitions stay ENQUEUED under its prefix).
    ``broker_messages``: messages that reached the broker's queue, ``None`` without a broker.
    """

    expected: frozenset[str]
    stats: PassStats
    handed_over: Counter[str]
    counts: Mapping[JobState, int]
    stored_ids: frozenset[str]
    all_ids: frozenset[str]
    broker_messages: int | None = None


def _some(ids: Iterable[str]) -> str:
    chosen = sorted(ids)[:EXAMPLES]
    return ", ".join(chosen) + (", …" if len(chosen) == EXAMPLES else "")


def _stats_problems(seen: Observation) -> list[str]:
    stats, size = seen.stats, len(seen.expected)
    found = []
    if not stats.lock_acquired:
        found.append("the pass did not get the scheduler lock")
    if stats.released != size:
        found.append(f"the pass released {stats.released} of {size} job(s)")
    found.extend(
        f"the pass counted {getattr(stats, name)} {name.replace('_', ' ')}"
        for name in _MUST_BE_ZERO
        if getattr(stats, name)
    )
    return found


def _dispatcher_problems(seen: Observation) -> list[str]:
    handed = seen.handed_over
    found = []
    if lost := seen.expected - handed.keys():
        found.append(f"{len(lost)} job(s) never reached the dispatcher (lost): {_some(lost)}")
    if twice := [job_id for job_id, times in handed.items() if times > 1]:
        found.append(f"{len(twice)} job(s) dispatched more than once: {_some(twice)}")
    if strangers := handed.keys() - seen.expected:
        found.append(f"{len(strangers)} unexpected job(s) dispatched: {_some(strangers)}")
    return found


def _storage_problems(seen: Observation) -> list[str]:
    found = []
    counts = dict(seen.counts)
    enqueued = counts.pop(JobState.ENQUEUED, 0)
    if enqueued != len(seen.all_ids):
        found.append(f"storage holds {enqueued} enqueued job(s), expected {len(seen.all_ids)}")
    found.extend(
        f"storage still holds {count} {state.value} job(s)"
        for state, count in counts.items()
        if count
    )
    if missing := seen.all_ids - seen.stored_ids:
        found.append(f"{len(missing)} job(s) not enqueued in storage: {_some(missing)}")
    return found


def problems(seen: Observation) -> list[str]:
    """Every way ``seen`` differs from "each job released exactly once, none lost"."""
    found = _stats_problems(seen) + _dispatcher_problems(seen) + _storage_problems(seen)
    if seen.broker_messages is not None and seen.broker_messages != len(seen.expected):
        found.append(
            f"the broker queue received {seen.broker_messages} message(s), "
            f"expected {len(seen.expected)}"
        )
    return found


def verify(seen: Observation, where: str) -> None:
    """Raise ``VerificationError`` naming every problem with ``seen``."""
    if found := problems(seen):
        raise VerificationError(
            f"verification failed for {where}: {'; '.join(found)}. No figures were printed."
        )
