"""The one factory for the benchmarks' Celery apps, and the worker side of every scenario.

``build_celery_app`` makes the app a scenario sends with and its workers run: JSON only, no
results, with the recording task (``record``: every execution appends ``"<task id> <time>"``
to one Redis list, so an id missing was lost and an id present twice ran twice) or a task that
never runs (``noop``, for calls due an hour later); with ``storage_url`` parallel-scheduler is
installed (``eta_threshold`` 60 s), so ``--parallel-scheduler`` runs its bootstep in the worker.

``celery -A benchmarks.harness.celery_apps worker`` builds ``app`` from the ``BENCH_*`` variables
the scenario sets (``devtools.processes.clean_environment``): ``BENCH_BROKER_URL``, ``BENCH_QUEUE``,
``BENCH_TASK``, ``BENCH_ISOLATED``, ``BENCH_STORAGE_URL``/``BENCH_PREFIX`` (the plugin),
``BENCH_RESULTS_URL``/``BENCH_RESULTS_KEY`` (the execution list), ``BENCH_READY_DIR`` (one
ready file per worker) and ``BENCH_STATS_FILE`` (ready and messages received, as JSON).
rq and huey workers use ``peer_apps``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import redis

__all__ = [
    "CELERY_TASK",
    "ETA_THRESHOLD",
    "NOOP_TASK",
    "announce_ready",
    "build_celery_app",
    "ready_count",
]

CELERY_TASK = "bench.burst.record"
NOOP_TASK = "bench.noop"
ETA_THRESHOLD = 60  # seconds: countdown calls beyond it are stored by the plugin
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"

_local = threading.local()


def _results() -> redis.Redis:
    """One connection per thread (rq and huey may run tasks on threads), made on first use."""
    client = getattr(_local, "client", None)
    if client is None:
        client = redis.Redis.from_url(os.environ.get("BENCH_RESULTS_URL", DEFAULT_BROKER))
        _local.client = client
    return client


def record(task_id: str, sent_at: float | None = None) -> None:
    """Append one execution to the run's list; ``sent_at`` when the system knows it."""
    now = time.time()
    line = f"{task_id} {now:.6f}" if sent_at is None else f"{task_id} {now:.6f} {sent_at:.6f}"
    _results().rpush(os.environ["BENCH_RESULTS_KEY"], line)


def _noop(i: int) -> None:
    """Never runs during the benchmark: every call is due an hour later."""


def build_celery_app(
    broker_url: str,
    queue: str,
    *,
    task: str = "record",
    isolated: bool = True,
    storage_url: str | None = None,
    prefix: str | None = None,
    name: str = "burst",
) -> Any:
    """The app a scenario sends with and its workers run.

    ``isolated``: remote control, gossip and events off, so a worker creates no keys or exchanges
    shared with other users of the broker; everything it touches is named after ``queue``.
    """
    from celery import Celery

    app = Celery(name, broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_default_queue=queue,
        broker_connection_retry_on_startup=True,
    )
    if isolated:
        app.conf.update(
            worker_enable_remote_control=False,
            worker_send_task_events=False,
            worker_hijack_root_logger=False,
            worker_cancel_long_running_tasks_on_connection_loss=True,
        )
    if task == "record":

        @app.task(name=CELERY_TASK, bind=True)  # type: ignore[untyped-decorator]
        def _record(self: Any, index: int, token: str) -> None:
            record(self.request.id)

    else:
        app.task(name=NOOP_TASK)(_noop)
    if storage_url is not None:
        import parallel_scheduler.celery

        app.conf.parallel_scheduler_storage_url = storage_url
        app.conf.parallel_scheduler_prefix = prefix
        app.conf.parallel_scheduler_eta_threshold = ETA_THRESHOLD
        parallel_scheduler.celery.install(app)
    return app


def announce_ready(**_: Any) -> None:
    """The scenario waits for one file per worker instead of guessing how long start-up takes."""
    folder = os.environ.get("BENCH_READY_DIR")
    if folder:
        (Path(folder) / f"ready-{os.getpid()}").write_text("ready")


def ready_count(folder: Path) -> int:
    """Workers that announced readiness (``announce_ready``) in ``folder``."""
    return len(list(folder.glob("ready-*")))


class ReceivedCounter:
    """Counts tasks the worker's consumer accepted and publishes the count to a file.

    The caller waits on that file rather than on a guess of how long prefetching takes; the
    count is written from a thread every 0.1 s, so counting costs the consumer one increment.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received = 0

    def on_received(self, **_: Any) -> None:
        self.received += 1

    def on_ready(self, **_: Any) -> None:
        threading.Thread(target=self._publish, name="received-counter", daemon=True).start()

    def _publish(self) -> None:
        temporary = self.path.with_suffix(".tmp")
        while True:
            temporary.write_text(json.dumps({"ready": True, "received": self.received}))
            os.replace(temporary, self.path)
            time.sleep(0.1)


def read_stats(path: Path) -> dict[str, Any]:
    """What a ``ReceivedCounter`` last wrote, ``{}`` before its first write."""
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


if "BENCH_QUEUE" in os.environ:  # a worker process: ``celery -A harness.celery_apps worker``
    from celery.signals import task_received, worker_ready

    app = build_celery_app(
        os.environ.get("BENCH_BROKER_URL", DEFAULT_BROKER),
        os.environ["BENCH_QUEUE"],
        task=os.environ.get("BENCH_TASK", "record"),
        isolated=os.environ.get("BENCH_ISOLATED", "1") == "1",
        storage_url=os.environ.get("BENCH_STORAGE_URL") or None,
        prefix=os.environ.get("BENCH_PREFIX") or None,
        name=os.environ.get("BENCH_APP_NAME", "burst"),
    )
    if os.environ.get("BENCH_READY_DIR"):
        worker_ready.connect(announce_ready, weak=False)
    if os.environ.get("BENCH_STATS_FILE"):
        _counter = ReceivedCounter(Path(os.environ["BENCH_STATS_FILE"]))
        task_received.connect(_counter.on_received, weak=False)
        worker_ready.connect(_counter.on_ready, weak=False)
