"""The worker side of ``benchmarks/outcome_cost.py``: a Celery app with parallel-scheduler
installed (so its workers record execution outcomes unless ``record_outcomes`` is off), a no-op
task (what is measured) and a mark task that appends ``<label> <time>`` to one Redis list (sent
before and after the no-ops, as plain Celery calls, which are never recorded).

``celery -A benchmarks.harness.outcome_app worker`` builds ``app`` from ``BENCH_BROKER_URL``,
``BENCH_QUEUE``, ``BENCH_STORAGE_URL``, ``BENCH_PREFIX``, ``BENCH_RESULTS_URL`` and
``BENCH_RESULTS_KEY``; ``PARALLEL_SCHEDULER_RECORD_OUTCOMES`` turns recording on or off.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery

import parallel_scheduler.celery

__all__ = ["MARK_TASK", "NOOP_TASK", "build_app"]

NOOP_TASK = "bench.outcome.noop"
MARK_TASK = "bench.outcome.mark"


def build_app(broker_url: str, queue: str, storage_url: str, prefix: str) -> Celery:
    """The app both the scenario (sending) and its worker (running) use."""
    app = Celery("bench-outcomes", broker=broker_url)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_default_queue=queue,
        worker_prefetch_multiplier=64,
        worker_hijack_root_logger=False,
    )
    parallel_scheduler.celery.install(app, storage_url=storage_url, prefix=prefix)

    @app.task(name=NOOP_TASK)  # type: ignore[untyped-decorator]
    def noop(index: int) -> None:
        return None

    @app.task(name=MARK_TASK)  # type: ignore[untyped-decorator]
    def mark(label: str) -> None:
        results = redis.Redis.from_url(os.environ["BENCH_RESULTS_URL"])
        results.rpush(os.environ["BENCH_RESULTS_KEY"], f"{label} {time.time()!r}")

    return app


def _from_environment() -> Any:
    if "BENCH_BROKER_URL" not in os.environ:
        return None
    return build_app(
        os.environ["BENCH_BROKER_URL"],
        os.environ["BENCH_QUEUE"],
        os.environ["BENCH_STORAGE_URL"],
        os.environ["BENCH_PREFIX"],
    )


app = _from_environment()
