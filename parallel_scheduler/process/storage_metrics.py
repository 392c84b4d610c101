"""Storage-side Prometheus metrics: what storage says of the jobs and of every scheduler
process, served by a process that is not a scheduler (the dashboard's ``/metrics``,
``parallel-scheduler exporter``), so the figures do not die with the schedulers they watch.

``storage_registry`` puts together, on a registry of its own:

* ``metrics.StorageCollector``: ``storage_up``, ``jobs{state}``, ``due_jobs``, ``lag_seconds``
  (the figures every scheduler process serves too);
* ``FleetCollector``: the scheduler instances (``schedulers{state}``, each instance's heartbeat
  age, and each live instance's seconds since its last pass of each kind), the due jobs per
  queue, the pauses in force (``pause_start_time_seconds{kind,name,paused_by,note}``), the rate
  limits in force (``rate_limit_per_second{kind,name}``), and the
  health judgement of ``process/health.py`` (``healthy``, ``health_problems{kind}``);
* ``metrics.add_process_metrics``: the serving process's own CPU and memory, and
  ``build_info{version}``.

Queues: storage keeps a job's queue with it (``queues.py``; a row stored before it did names it
only in its call options), but counts no jobs per queue, so no store can count the due jobs per
queue through an index. The count is taken over the earliest ``QUEUE_SAMPLE`` due jobs (one
bounded, indexed page read);
``due_jobs_by_queue_read`` says how many were read: when it equals ``QUEUE_SAMPLE``, more are due
than were counted, and ``due_jobs`` is the total to trust. A job that names no queue is counted
under ``queue="(none)"``: Celery's routing picks its queue at release. A held job is not due, so
a paused queue's jobs are not counted here (``jobs{state="held"}`` counts them).

Everything is read at scrape time and cached for ``STORAGE_CACHE`` seconds, like
``StorageCollector``. A failed read leaves the fleet's figures out (``storage_up`` says why).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from parallel_scheduler.client import Client
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.process.health import PROBLEM_KINDS, Problem, health_problems
from parallel_scheduler.process.metrics import (
    PREFIX,
    STORAGE_CACHE,
    StorageCollector,
    add_process_metrics,
)
from parallel_scheduler.process.scheduler_views import KINDS, last_pass_at
from parallel_scheduler.process.status_report import health_facts
from parallel_scheduler.queues import record_queue
from storage_adapters import JobQuery, JobRecord, JobState, PauseRecord, RateLimitRecord

__all__ = ["NO_QUEUE", "QUEUE_SAMPLE", "FleetCollector", "storage_registry"]

logger = logging.getLogger(__name__)
#: Due jobs read to count them per queue (the earliest due first).
QUEUE_SAMPLE: Final = 1000
#: The queue label of a job that names no queue.
NO_QUEUE: Final = "(none)"


def queue_of(record: JobRecord) -> str:
    """The queue of a stored job (``queues.record_queue``), else ``NO_QUEUE``."""
    return record_queue(record) or NO_QUEUE


@dataclass(frozen=True)
class _Fleet:
    facts: dict[str, Any]
    problems: list[Problem]
    by_queue: Counter[str]
    read: int
    pauses: list[PauseRecord]
    limits: list[RateLimitRecord]
    at: float  # this host's clock, for the ages of passes (stamped with their host's clock)


class FleetCollector(Collector):
    """The scheduler instances, the due jobs per queue and the health judgement, from storage
    at scrape time (cached). ``max_lag``: the lag the judgement allows (default: the client's
    ``lag_alert`` setting)."""

    def __init__(
        self,
        client: Client,
        *,
        max_lag: float | None = None,
        cache_seconds: float = STORAGE_CACHE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._max_lag = client.settings.lag_alert if max_lag is None else max_lag
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._guard = threading.Lock()
        self._read_at = -float("inf")
        self._fleet: _Fleet | None = None

    def describe(self) -> Iterable[GaugeMetricFamily]:
        """Nothing: registering must not read storage (the families vary with what it holds)."""
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        fleet = self._read()
        if fleet is None:
            return
        yield from _instances(fleet)
        yield from _queues(fleet)
        yield _pauses(fleet)
        yield _limits(fleet)
        yield from _health(fleet)

    def _read(self) -> _Fleet | None:
        with self._guard:
            if time.monotonic() - self._read_at < self._cache_seconds:
                return self._fleet
            client = self._client
            try:
                facts = health_facts(client)
                query = JobQuery(state=JobState.SCHEDULED, due_to=facts["now"])
                rows = call_storage(
                    lambda: client.storage.list_jobs_page(query, QUEUE_SAMPLE),
                    give_up_after=client.retry_for,
                )
                pauses = client.pauses()
                limits = client.rate_limits()
            except Exception as exc:  # a scrape must answer: storage_up says storage is down
                logger.warning("metrics: reading the scheduler instances failed: %s", exc)
                self._fleet = None
            else:
                problems = health_problems(facts, max_lag=self._max_lag, settings=client.settings)
                by_queue = Counter(queue_of(row) for row in rows)
                self._fleet = _Fleet(
                    facts, problems, by_queue, len(rows), pauses, limits, self._clock()
                )
            self._read_at = time.monotonic()
            return self._fleet


def _instances(fleet: _Fleet) -> Iterable[GaugeMetricFamily]:
    views = fleet.facts["schedulers"]
    counts = GaugeMetricFamily(
        PREFIX + "schedulers",
        "Scheduler instances on record, alive or dead (by their heartbeat)",
        labels=["state"],
    )
    alive = sum(1 for view in views if view["alive"])
    counts.add_metric(["alive"], alive)
    counts.add_metric(["dead"], len(views) - alive)
    yield counts
    beat = GaugeMetricFamily(
        PREFIX + "scheduler_heartbeat_age_seconds",
        "Seconds since each scheduler instance's last heartbeat (storage clock)",
        labels=["instance", "state"],
    )
    passes = GaugeMetricFamily(
        PREFIX + "scheduler_last_pass_age_seconds",
        "Seconds since each live instance's last pass of each kind ended",
        labels=["instance", "kind"],
    )
    for view in views:
        state = "alive" if view["alive"] else "dead"
        if view["heartbeat_age_seconds"] is not None:
            beat.add_metric([view["id"], state], view["heartbeat_age_seconds"])
        if not view["alive"]:
            continue
        for kind in KINDS:
            at = last_pass_at(view, kind)
            if at != -float("inf"):
                passes.add_metric([view["id"], kind], max(0.0, fleet.at - at))
    yield beat
    yield passes


def _queues(fleet: _Fleet) -> Iterable[GaugeMetricFamily]:
    queues = GaugeMetricFamily(
        PREFIX + "due_jobs_by_queue",
        f"Due jobs per queue, counted among the earliest {QUEUE_SAMPLE} due jobs",
        labels=["queue"],
    )
    for queue, count in sorted(fleet.by_queue.items()):
        queues.add_metric([queue], count)
    yield queues
    yield GaugeMetricFamily(
        PREFIX + "due_jobs_by_queue_read",
        f"Due jobs read to count them per queue (at most {QUEUE_SAMPLE}: there, more are due)",
        value=fleet.read,
    )


def _pauses(fleet: _Fleet) -> GaugeMetricFamily:
    pauses = GaugeMetricFamily(
        PREFIX + "pause_start_time_seconds",
        "Pauses in force (their jobs are held, not released): when each began, epoch seconds "
        "on the storage clock, labelled kind (queue or task), name, paused_by and note",
        labels=["kind", "name", "paused_by", "note"],
    )
    for pause in fleet.pauses:
        pauses.add_metric(
            [pause.kind.value, pause.name, pause.paused_by, pause.note], pause.paused_at
        )
    return pauses


def _limits(fleet: _Fleet) -> GaugeMetricFamily:
    limits = GaugeMetricFamily(
        PREFIX + "rate_limit_per_second",
        "Rate limits in force (one budget every scheduler spends from as it releases jobs): "
        "releases per second each allows (count / period), labelled kind (queue or task) and name",
        labels=["kind", "name"],
    )
    for limit in fleet.limits:
        limits.add_metric([limit.kind.value, limit.name], limit.count / limit.period)
    return limits


def _health(fleet: _Fleet) -> Iterable[GaugeMetricFamily]:
    yield GaugeMetricFamily(
        PREFIX + "healthy",
        "1 when no health problem is found (parallel-scheduler status --check exits 0)",
        value=0 if fleet.problems else 1,
    )
    problems = GaugeMetricFamily(
        PREFIX + "health_problems",
        "Health problems found, by kind (see parallel-scheduler status --check)",
        labels=["kind"],
    )
    found: Mapping[str, int] = Counter(problem.kind for problem in fleet.problems)
    for kind in PROBLEM_KINDS:
        problems.add_metric([kind], found.get(kind, 0))
    yield problems


def storage_registry(client: Client, *, max_lag: float | None = None) -> CollectorRegistry:
    """A registry with every storage-side figure of ``client``'s store, the serving process's
    own, and the build info: what the dashboard's ``/metrics`` and the exporter serve."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(StorageCollector(client.storage))
    registry.register(FleetCollector(client, max_lag=max_lag))
    add_process_metrics(registry)
    return registry
