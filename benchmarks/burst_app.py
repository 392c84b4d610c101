"""The worker side of the burst benchmark: one recording task for every system it measures.

Every execution appends ``"<task id> <time>"`` (and, where the system can tell, the time the job
was handed to its queue) to one Redis list, so the harness can count executions per id: an id
missing from the list was lost, an id present twice ran twice. Recording is one ``RPUSH`` so it
costs every system the same.

This module is imported by ``celery -A burst_app worker``, by ``rq worker`` (for
``burst_app.record_rq``) and by ``huey_consumer burst_app.huey``, with its configuration in the
``BURST_*`` environment variables the harness sets; and by the harness itself, which builds
apps for each repetition with the same functions.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timezone
from pathlib import Path
from typing import Any

import redis

CELERY_TASK = "bench.burst.record"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"

_local = threading.local()


def _results() -> redis.Redis:
    """One connection per thread (rq and huey may run tasks on threads), made on first use."""
    client = getattr(_local, "client", None)
    if client is None:
        client = redis.Redis.from_url(os.environ.get("BURST_RESULTS_URL", DEFAULT_BROKER))
        _local.client = client
    return client


def record(task_id: str, sent_at: float | None = None) -> None:
    """Append one execution to the run's list; ``sent_at`` when the system knows it."""
    now = time.time()
    line = f"{task_id} {now:.6f}" if sent_at is None else f"{task_id} {now:.6f} {sent_at:.6f}"
    _results().rpush(os.environ["BURST_RESULTS_KEY"], line)


# -- Celery ----------------------------------------------------------------------------------------


def build_celery_app(broker_url: str, queue: str) -> Any:
    """The app workers run and the harness sends with: JSON only, no results, no remote control.

    Remote control, gossip and events are off so a worker creates no keys or exchanges shared
    with other users of the broker; everything it touches is named after ``queue``.
    """
    from celery import Celery

    app = Celery("burst", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_default_queue=queue,
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )

    @app.task(name=CELERY_TASK, bind=True)  # type: ignore[untyped-decorator]
    def _record(self: Any, index: int, token: str) -> None:
        record(self.request.id)

    return app


def _announce_ready(**_: Any) -> None:
    """The harness waits for one file per worker instead of guessing how long start-up takes."""
    folder = os.environ.get("BURST_READY_DIR")
    if folder:
        (Path(folder) / f"ready-{os.getpid()}").write_text("ready")


app = build_celery_app(
    os.environ.get("BURST_BROKER_URL", DEFAULT_BROKER), os.environ.get("BURST_QUEUE", "burst")
)
if os.environ.get("BURST_READY_DIR"):
    from celery.signals import worker_ready

    worker_ready.connect(_announce_ready, weak=False)


# -- rq --------------------------------------------------------------------------------------------


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


# -- huey ------------------------------------------------------------------------------------------


def make_huey(name: str, url: str) -> tuple[Any, Any]:
    """A Redis-backed huey and its recording task; the task's name is the same in every process,
    so the consumer resolves what the harness scheduled."""
    from huey import RedisHuey

    huey = RedisHuey(name, url=url, results=False, utc=True)

    def record_huey(index: int, token: str, task: Any = None) -> None:
        record(task.id)

    task = huey.task(context=True, name="record_huey")(record_huey)
    huey.on_startup("announce_ready")(_announce_ready)
    return huey, task


if os.environ.get("BURST_HUEY"):
    huey, record_huey_task = make_huey(
        os.environ["BURST_QUEUE"], os.environ.get("BURST_BROKER_URL", DEFAULT_BROKER)
    )
