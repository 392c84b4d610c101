"""The worker bootstep: ``celery -A proj worker --parallel-scheduler`` runs a scheduler inside
every worker started with the flag; the scheduler lock keeps exactly one of them active, and
another takes over within one lock lease when it dies.

The configuration is checked (storage reachable, schema set up) before the worker starts
consuming, so a misconfigured worker stops at start-up with one clear line on stderr,
``parallel-scheduler cannot start: …`` (exit status 1, no traceback), rather than running
half-configured. The scheduler itself is built after the pool has forked its children, so no
database connection is ever shared across a fork.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import click
from celery import bootsteps

from parallel_scheduler.celery.integration import get_integration
from parallel_scheduler.celery.outcome_metrics import OutcomeMetricsCollector
from parallel_scheduler.celery.outcome_spool import OutcomeSpool
from parallel_scheduler.errors import ParallelSchedulerError
from parallel_scheduler.log_format import use_json_for_package
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.process.startup import log_start
from storage_adapters import StorageError, mask_url

__all__ = ["ParallelSchedulerStep", "register_worker_step"]

logger = logging.getLogger(__name__)
FLAG = "--parallel-scheduler"


class ParallelSchedulerStep(bootsteps.StartStopStep):  # type: ignore[misc]
    label = "parallel-scheduler"
    requires = ("celery.worker.components:Pool",)

    def __init__(self, worker: Any, parallel_scheduler: bool = False, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.enabled = bool(parallel_scheduler)
        self._service: SchedulerService | None = None
        self._spool: OutcomeSpool | None = None
        if self.enabled:
            self._check_configuration(worker.app)
            if get_integration(worker.app).settings.metrics_port is not None:
                # made before the pool forks, so its children inherit it and hand their outcome
                # metrics to the /metrics this process serves
                self._spool = OutcomeSpool()

    def _check_configuration(self, app: Any) -> None:
        try:
            service = get_integration(app).make_service()
        except (ParallelSchedulerError, StorageError, ValueError) as exc:
            url = get_integration(app).settings.storage_url if _settings_ok(app) else None
            message = str(exc).replace(url, mask_url(url)) if url else str(exc)
            # SystemExit with a message: the interpreter prints just that line to stderr and
            # exits 1 (Celery's worker command passes it through); Celery's own errors here
            # would print a traceback of several dozen lines around it
            raise SystemExit(f"parallel-scheduler cannot start: {message}") from None
        service.close()  # opened only to check; the real one is built after the fork

    def start(self, worker: Any) -> None:
        owner = f"{worker.hostname}:{os.getpid()}"
        integration = get_integration(worker.app)
        if integration.settings.log_format == "json":
            # Celery owns the worker's logging: JSON for this package's lines only, on the
            # stream Celery writes to; Celery's own lines keep their format
            use_json_for_package()
        self._service = integration.make_service(owner=owner)
        if self._service.metrics is not None:  # the worker's outcome metrics beside the rest
            children = None if self._spool is None else self._spool.read
            self._service.metrics.registry.register(OutcomeMetricsCollector(children))
        log_start(self._service)
        self._service.start()

    def stop(self, worker: Any) -> None:
        service, self._service = self._service, None
        if service is not None:
            service.close()  # in-flight work finishes, both locks are released
        spool, self._spool = self._spool, None
        if spool is not None:
            spool.close()

    shutdown = stop


def _settings_ok(app: Any) -> bool:
    try:
        _ = get_integration(app).settings
    except ValueError:
        return False
    return True


def register_worker_step(app: Any) -> None:
    """Add the bootstep and its ``--parallel-scheduler`` flag to ``celery worker``."""
    if ParallelSchedulerStep in app.steps["worker"]:
        return
    app.user_options["worker"].add(
        click.Option(
            [FLAG],
            is_flag=True,
            default=False,
            help="Run the parallel-scheduler inside this worker (one active per cluster).",
        )
    )
    app.steps["worker"].add(ParallelSchedulerStep)
