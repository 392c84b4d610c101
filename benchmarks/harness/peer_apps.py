"""The worker side of the burst benchmark's peers: rq's job function and huey's task, recording
each execution as the Celery task does (``celery_apps.record``).

``rq worker`` imports ``benchmarks.harness.peer_apps.record_rq``; ``huey_consumer
benchmarks.harness.peer_apps.huey`` builds ``huey`` from ``BENCH_QUEUE`` and ``BENCH_BROKER_URL``
when ``BENCH_HUEY`` is set.
"""

from __future__ import annotations

import os
from datetime import timezone
from typing import Any

from benchmarks.harness.celery_apps import DEFAULT_BROKER, announce_ready, record

__all__ = ["make_huey", "record_rq"]


def record_rq(index: int, token: str) -> None:
    """rq's job function: rq stamps ``enqueued_at`` when its scheduler moves the job to the queue,
    which gives the due -> sent lateness the other systems report."""
    from rq import get_current_job

    job = get_current_job()
    assert job is not None, "record_rq runs only inside an rq worker"
    enqueued = job.enqueued_at
    if enqueued is not None and enqueued.tzinfo is None:  # rq keeps naive UTC times
        enqueued = enqueued.replace(tzinfo=timezone.utc)
    record(job.id, None if enqueued is None else enqueued.timestamp())


def make_huey(name: str, url: str) -> tuple[Any, Any]:
    """A Redis-backed huey and its recording task; the task's name is the same in every process,
    so the consumer resolves what the scenario scheduled."""
    from huey import RedisHuey  # type: ignore[import-untyped]

    huey = RedisHuey(name, url=url, results=False, utc=True)

    def record_huey(index: int, token: str, task: Any = None) -> None:
        record(task.id)

    task = huey.task(context=True, name="record_huey")(record_huey)
    huey.on_startup("announce_ready")(announce_ready)
    return huey, task


if os.environ.get("BENCH_HUEY"):
    huey, record_huey_task = make_huey(
        os.environ["BENCH_QUEUE"], os.environ.get("BENCH_BROKER_URL", DEFAULT_BROKER)
    )
