"""Prometheus metrics of one scheduler process: the metric objects, the recorder the schedulers
report to, the storage figures read at scrape time, and the HTTP endpoint that serves them.

Everything lives on a ``CollectorRegistry`` of its own per ``SchedulerService``, never on
``prometheus_client``'s global registry, so several services in one process (tests, an embedded
worker next to a command) neither collide nor report each other's figures.

Two kinds of figures:

* events the schedulers report as they happen (``PrometheusRecorder``: releases per path, errors,
  recovered claims, expiries, pass durations, lateness, locks, firings, misfires, heartbeat);
  with shards, the counters and histograms add up every shard this process serves, and
  ``lock_held`` has a ``shard`` label (``"0"`` without shards);
* the state of storage (``StorageCollector``: jobs per state, jobs due now, how late the oldest
  due job is), read when Prometheus scrapes, and cached for ``STORAGE_CACHE`` seconds so that
  several scrapers (or an impatient one) cost storage one count every few seconds, not a count
  per scrape. Due jobs are counted through the due index up to ``DUE_COUNT_LIMIT``: beyond it the
  figure is that limit, a lower bound, and ``lag_seconds`` is the number to alert on anyway.

Beside them, the process's own CPU, memory and file descriptors (``prometheus_client``'s process
collector, ``process_*``) and ``parallel_scheduler_build_info{version}`` (``add_process_metrics``).
Importing this module turns ``prometheus_client``'s ``_created`` series off (they double every
counter's series for a timestamp nobody alerts on). The endpoint also answers ``/healthz`` for a
liveness probe (``process/loop_health.py``; ``http_endpoint.py`` serves both). What storage says
of every scheduler, served by a process that is not one, is in ``storage_metrics.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from parallel_scheduler.clock import ClockSource
from parallel_scheduler.engine.recorder import (
    LATENESS_CAUSES,
    RELEASE_ERROR_REASONS,
    RELEASE_PATHS,
)
from parallel_scheduler.errors import ConfigurationError
from parallel_scheduler.process.http_endpoint import HealthCheck, metrics_app, serve
from parallel_scheduler.recurring.overlap_policy import HOLDING_POLICIES
from parallel_scheduler.recurring.triggers import MISFIRE_POLICIES
from parallel_scheduler.version import __version__
from storage_adapters import ClaimedJob, JobState, JobStore, ReleaseStore

__all__ = [
    "DUE_COUNT_LIMIT",
    "PREFIX",
    "STORAGE_CACHE",
    "MetricsServer",
    "PrometheusRecorder",
    "StorageCollector",
    "add_process_metrics",
]

logger = logging.getLogger(__name__)

PREFIX: Final = "parallel_scheduler_"
#: Seconds a scrape reuses the last storage figures instead of asking storage again.
STORAGE_CACHE: Final = 5.0
#: Due jobs are counted up to this many (through the due index, never a scan of the table).
DUE_COUNT_LIMIT: Final = 100_000
#: Pass durations: a pass with nothing due takes milliseconds, a full batch up to seconds.
PASS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: Due -> sent: a healthy scheduler releases within about one poll interval.
LATENESS_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
SCHEDULER_KINDS: Final = ("delayed", "recurring")
LOCKS: Final = ("delayed-scheduler", "recurring-scheduler")

disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client


def add_process_metrics(registry: CollectorRegistry) -> None:
    """The serving process's own figures (``process_*``: CPU, memory, open files, start time)
    and ``parallel_scheduler_build_info{version}`` (always 1), on ``registry``."""
    ProcessCollector(registry=registry)
    info = Gauge(
        PREFIX + "build_info", "The running parallel-scheduler's version", ["version"],
        registry=registry,
    )  # fmt: skip
    info.labels(__version__).set(1)


class PrometheusRecorder:
    """The ``MetricsRecorder`` behind ``/metrics``: one Prometheus object per metric."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(short: str, doc: str, *labels: str) -> Counter:
            return Counter(PREFIX + short, doc, labels, registry=registry)

        def gauge(short: str, doc: str, *labels: str) -> Gauge:
            return Gauge(PREFIX + short, doc, labels, registry=registry)

        def histogram(short: str, doc: str, buckets: Sequence[float], *labels: str) -> Histogram:
            return Histogram(PREFIX + short, doc, labels, buckets=buckets, registry=registry)

        self._released = counter("released", "Jobs handed to the broker, by release path", "path")
        self._release_errors = counter(
            "release_errors", "Claimed jobs not released cleanly, by reason", "reason"
        )
        self._recovered = counter(
            "claims_recovered", "Claims of dead or stalled releasers taken back"
        )
        self._expired = counter(
            "expired", "Jobs whose expiry passed before release (marked Expired, not sent)"
        )
        self._pass_seconds = histogram(
            "pass_seconds",
            "Duration of passes that held the lock, by scheduler kind",
            PASS_BUCKETS,
            "kind",
        )
        self._lateness = histogram(
            "release_lateness_seconds",
            "Due time to send time (storage clock), per job, by cause: the release, or the wait "
            "for a rate limit",
            LATENESS_BUCKETS,
            "cause",
        )
        self._lock_held = gauge(
            "lock_held",
            "1 while this instance is the active holder of the lock, per shard ('0' without)",
            "lock",
            "shard",
        )
        self._heartbeat = gauge(
            "heartbeat_timestamp_seconds",
            "Epoch seconds of this instance's last heartbeat written to storage (0: none yet)",
        )
        self._fired = counter("firings", "Firing jobs created by recurring schedules")
        self._misfires = counter(
            "misfires", "Recurring ticks missed by more than the grace, by misfire policy", "policy"
        )
        self._overlap_held = counter(
            "overlap_held",
            "Recurring ticks not fired while an earlier firing ran (skipped, or collapsed into "
            "a buffered one), by overlap policy",
            "policy",
        )
        self._paused_after_failures = counter(
            "recurring_paused_after_failures",
            "Recurring jobs paused by the scheduler after their pause_after_failures failed "
            "firings in a row",
        )
        # Every labelled series exists from the start at 0, so rate() and alerts see it at once.
        for path in RELEASE_PATHS:
            self._released.labels(path)
        for reason in RELEASE_ERROR_REASONS:
            self._release_errors.labels(reason)
        for kind in SCHEDULER_KINDS:
            self._pass_seconds.labels(kind)
        for cause in LATENESS_CAUSES:
            self._lateness.labels(cause)
        for lock in LOCKS:
            self._lock_held.labels(lock, "0").set(0)
        for policy in MISFIRE_POLICIES:
            self._misfires.labels(policy)
        for held in HOLDING_POLICIES:
            self._overlap_held.labels(held)

    def released(self, path: str, count: int) -> None:
        if count:
            self._released.labels(path).inc(count)

    def release_errors(self, reason: str, count: int) -> None:
        if count:
            self._release_errors.labels(reason).inc(count)

    def claims_recovered(self, count: int) -> None:
        if count:
            self._recovered.inc(count)

    def expired(self, count: int) -> None:
        if count:
            self._expired.inc(count)

    def pass_seconds(self, kind: str, seconds: float) -> None:
        self._pass_seconds.labels(kind).observe(seconds)

    def lateness(self, seconds: float, cause: str = "release") -> None:
        self._lateness.labels(cause).observe(max(0.0, seconds))

    def lock_held(self, lock: str, held: bool, shard: str = "0") -> None:
        """Per lock and shard: each shard's scheduler sets its own series, so with shards the
        series never flap between shards (``sum by (lock)`` counts the shards held)."""
        self._lock_held.labels(lock, shard).set(1 if held else 0)

    def follow_heartbeat(self, last_beat: Callable[[], float | None]) -> None:
        """Read the heartbeat gauge from ``last_beat`` at scrape time (``instances.Heartbeat``
        owns the liveness record; the gauge shows when it was last written)."""
        self._heartbeat.set_function(lambda: last_beat() or 0.0)

    def fired(self, count: int) -> None:
        if count:
            self._fired.inc(count)

    def misfires(self, policy: str, count: int) -> None:
        if count:
            self._misfires.labels(policy).inc(count)

    def overlap_held(self, policy: str, count: int) -> None:
        if count:
            self._overlap_held.labels(policy).inc(count)

    def paused_after_failures(self, count: int) -> None:
        if count:
            self._paused_after_failures.inc(count)


class GaugedStore(JobStore, ReleaseStore, ClockSource, Protocol):
    """What the scrape-time gauges read: counts per state, the due jobs and the clock."""


class StorageCollector(Collector):
    """Jobs per state, jobs due now and the lag, read from storage at scrape time (cached)."""

    def __init__(self, storage: GaugedStore, cache_seconds: float = STORAGE_CACHE) -> None:
        self._storage = storage
        self._cache_seconds = cache_seconds
        self._guard = threading.Lock()  # one storage read at a time, whoever scrapes
        self._read_at = -float("inf")
        self._figures: tuple[dict[JobState, int], int, float] | None = None

    def collect(self) -> Iterable[GaugeMetricFamily]:
        up = GaugeMetricFamily(PREFIX + "storage_up", "1 if the last storage read succeeded")
        figures = self._read()
        up.add_metric([], 1 if figures is not None else 0)
        yield up
        if figures is None:
            return  # absent rather than stale: an alert on absent() or storage_up notices
        counts, due, lag = figures
        jobs = GaugeMetricFamily(PREFIX + "jobs", "Jobs in storage, by state", labels=["state"])
        for state in JobState:
            jobs.add_metric([state.value], counts.get(state, 0))
        yield jobs
        yield GaugeMetricFamily(
            PREFIX + "due_jobs",
            f"Scheduled jobs due now (counted up to {DUE_COUNT_LIMIT}, a lower bound there)",
            value=due,
        )
        yield GaugeMetricFamily(
            PREFIX + "lag_seconds",
            "How long the earliest due job has been due (0 when nothing is due)",
            value=lag,
        )

    def _read(self) -> tuple[dict[JobState, int], int, float] | None:
        with self._guard:
            if time.monotonic() - self._read_at < self._cache_seconds:
                return self._figures
            try:
                counts = self._storage.count_by_state()
                due = len(self._storage.fetch_due_ids(DUE_COUNT_LIMIT))
                next_due = self._storage.next_due_at()
                now = self._storage.now()
            except Exception as exc:  # a scrape must answer: report storage down, not a 500
                logger.warning("metrics: reading storage failed: %s", exc)
                self._figures = None
            else:
                lag = max(0.0, now - next_due) if next_due is not None else 0.0
                self._figures = (counts, due, lag)
            self._read_at = time.monotonic()
            return self._figures


class MetricsServer:
    """``/metrics`` over HTTP for one service: its registry, recorder and storage collector,
    served from ``start()`` to ``stop()``."""

    def __init__(self, storage: GaugedStore, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.recorder = PrometheusRecorder(self.registry)
        self.registry.register(StorageCollector(storage))
        add_process_metrics(self.registry)
        #: What ``/healthz`` answers (``SchedulerService`` sets its loops' check); ``None``:
        #: ``/healthz`` is served as metrics, like any other path.
        self.health: HealthCheck | None = None
        self._host = host
        self._port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None  # the port bound (``0`` asks for a free one)

    @property
    def url(self) -> str | None:
        """Where the metrics are served, once started."""
        if self.port is None:
            return None
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}/metrics"

    def on_released(self, claim: ClaimedJob, sent_at: float) -> None:
        """A ``ReleaseListener``: how late the job went, due -> sent on the storage clock."""
        self.recorder.lateness(sent_at - claim.due_at)

    def start(self) -> None:
        if self._server is not None:
            return
        try:
            app = metrics_app(self.registry, lambda: self.health)
            server, thread = serve(app, self._host, self._port)
        except OSError as exc:
            raise ConfigurationError(
                f"metrics_port {self._port}: cannot serve metrics on {self._host}:{self._port}: "
                f"{exc}"
            ) from None
        self._server, self._thread = server, thread
        self.port = server.server_port
        logger.info("serving Prometheus metrics at %s", self.url)

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self.port = None
