"""The worker side's outcome metrics: due -> started lateness per queue (a histogram) and final
outcomes per task (a counter), on a registry of this process that the worker bootstep adds to
the ``/metrics`` endpoint of the scheduler it runs (``metrics_port``).

They count what this process saw: with Celery's prefork pool, tasks start and end in the pool's
child processes, whose figures this endpoint (served by the parent) does not include; the
``solo`` and ``threads`` pools run tasks in the process that serves them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["OUTCOME_REGISTRY", "OutcomeMetricsBridge", "outcome", "started_late"]

PREFIX: Final = "parallel_scheduler_"
#: Due -> started: the release's lateness plus the time in the broker's queue.
START_LATENESS_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)

OUTCOME_REGISTRY = CollectorRegistry(auto_describe=True)
_lateness = Histogram(
    PREFIX + "start_lateness_seconds",
    "Due time (storage) to task start (worker clock), per released job, by queue",
    ["queue"],
    buckets=START_LATENESS_BUCKETS,
    registry=OUTCOME_REGISTRY,
)
_outcomes = Counter(
    PREFIX + "task_outcomes",
    "Final outcomes of released jobs on this worker, by task and outcome",
    ["task", "outcome"],
    registry=OUTCOME_REGISTRY,
)


def started_late(queue: str, seconds: float) -> None:
    _lateness.labels(queue).observe(max(0.0, seconds))


def outcome(task: str, state: str) -> None:
    _outcomes.labels(task, state).inc()


class OutcomeMetricsBridge(Collector):
    """This process's outcome metrics, for another registry (the scheduler's ``/metrics``)."""

    def collect(self) -> Iterable[Metric]:
        return OUTCOME_REGISTRY.collect()
