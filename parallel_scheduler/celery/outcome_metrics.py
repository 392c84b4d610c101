"""The worker side's outcome metrics: due -> started lateness per queue (a histogram) and final
outcomes per task (a counter), served on the ``/metrics`` endpoint of the scheduler the worker
bootstep runs (``metrics_port``), whatever the pool.

Each process keeps its own tallies (plain numbers, one lock). With Celery's prefork pool the
tasks run in the pool's child processes, so each child also writes its tallies to a file in a
folder the main process made before the pool forked (``outcome_spool``), at most once a second
and when it exits; the collector adds every child's file to its own process's tallies. A child
killed with SIGKILL loses at most its last second of counts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "START_LATENESS_BUCKETS",
    "OutcomeMetricsCollector",
    "Tallies",
    "outcome",
    "started_late",
    "tallies",
]

PREFIX: Final = "parallel_scheduler_"
#: Due -> started: the release's lateness plus the time in the broker's queue.
START_LATENESS_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


@dataclass
class Tallies:
    """Counts of one process (or the sum of several): per queue, the lateness observations in
    each bucket (the last one past the highest bound) and their sum; per (task, outcome), the
    final outcomes."""

    lateness: dict[str, list[int]] = field(default_factory=dict)
    lateness_sum: dict[str, float] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)

    def observe(self, queue: str, seconds: float) -> None:
        counts = self.lateness.setdefault(queue, [0] * (len(START_LATENESS_BUCKETS) + 1))
        counts[_bucket_of(seconds)] += 1
        self.lateness_sum[queue] = self.lateness_sum.get(queue, 0.0) + seconds

    def count(self, task: str, state: str) -> None:
        self.outcomes[task, state] = self.outcomes.get((task, state), 0) + 1

    def add(self, other: Tallies) -> None:
        for queue, counts in other.lateness.items():
            mine = self.lateness.setdefault(queue, [0] * len(counts))
            for index, value in enumerate(counts):
                mine[index] += value
            self.lateness_sum[queue] = self.lateness_sum.get(queue, 0.0) + (
                other.lateness_sum.get(queue, 0.0)
            )
        for key, value in other.outcomes.items():
            self.outcomes[key] = self.outcomes.get(key, 0) + value

    def to_json(self) -> dict[str, Any]:
        return {
            "lateness": {q: [c, self.lateness_sum.get(q, 0.0)] for q, c in self.lateness.items()},
            "outcomes": [[task, state, n] for (task, state), n in self.outcomes.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tallies:
        """Tallies from ``to_json``'s shape; raises ``ValueError`` on anything else."""
        try:
            width = len(START_LATENESS_BUCKETS) + 1
            made = cls()
            for queue, (counts, total) in data["lateness"].items():
                if len(counts) != width:
                    raise ValueError("a lateness row of the wrong width")
                made.lateness[str(queue)] = [int(c) for c in counts]
                made.lateness_sum[str(queue)] = float(total)
            for task, state, n in data["outcomes"]:
                made.outcomes[str(task), str(state)] = int(n)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not outcome tallies: {exc}") from None
        return made


def _bucket_of(seconds: float) -> int:
    for index, bound in enumerate(START_LATENESS_BUCKETS):
        if seconds <= bound:
            return index
    return len(START_LATENESS_BUCKETS)


class _ProcessTallies:
    """This process's tallies: fresh in a forked child (a child counts only its own tasks), with
    listeners told after each change (the spool; they survive a fork and see the new pid)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._pid = os.getpid()
        self._tallies = Tallies()
        self.changed: list[Any] = []  # callables, each called (outside the lock) after a change

    def _mine(self) -> Tallies:
        if self._pid != os.getpid():  # inherited through a fork: start from zero
            self._pid, self._tallies = os.getpid(), Tallies()
        return self._tallies

    def update(self, change: Any) -> None:
        with self._guard:
            change(self._mine())
            listeners = list(self.changed)
        for listener in listeners:
            listener()

    def copy(self) -> Tallies:
        with self._guard:
            total = Tallies()
            total.add(self._mine())
            return total


_process = _ProcessTallies()


def tallies() -> _ProcessTallies:
    """This process's tallies (the spool listens to them in a pool child)."""
    return _process


def started_late(queue: str, seconds: float) -> None:
    _process.update(lambda t: t.observe(queue, max(0.0, seconds)))


def outcome(task: str, state: str) -> None:
    _process.update(lambda t: t.count(task, state))


class OutcomeMetricsCollector(Collector):
    """The outcome metrics of this process plus those ``others`` returns (the pool children's),
    for the scheduler's registry."""

    def __init__(self, others: Any = None) -> None:
        self._others = others

    def collect(self) -> Iterable[Metric]:
        total = _process.copy()
        if self._others is not None:
            total.add(self._others())
        lateness = HistogramMetricFamily(
            PREFIX + "start_lateness_seconds",
            "Due time (storage) to task start (worker clock), per released job, by queue",
            labels=["queue"],
        )
        bounds = [*map(floatToGoString, START_LATENESS_BUCKETS), "+Inf"]  # as Histogram names them
        for queue, counts in sorted(total.lateness.items()):
            running, buckets = 0, []
            for bound, value in zip(bounds, counts, strict=True):
                running += value
                buckets.append((bound, float(running)))
            lateness.add_metric([queue], buckets, total.lateness_sum.get(queue, 0.0))
        outcomes = CounterMetricFamily(
            PREFIX + "task_outcomes",
            "Final outcomes of released jobs on this worker, by task and outcome",
            labels=["task", "outcome"],
        )
        for (task, state), n in sorted(total.outcomes.items()):
            outcomes.add_metric([task, state], float(n))
        return [lateness, outcomes]
