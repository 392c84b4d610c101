"""A Celery app with parallel-scheduler installed, run by real ``celery worker`` processes in the
plugin tests. Everything comes from the environment so each test gets its own queue and prefix.

Its task records, in a Redis list, its task id, when it ran, its arguments and how it was routed,
so a test can count every execution and compare what arrived with what was sent.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

import redis
from celery.signals import worker_ready

import parallel_scheduler.celery
from tests.celery_apps import worker_app

BROKER_URL = os.environ.get("PS_BROKER_URL", "redis://127.0.0.1:6379/0")
RECORD_URL = os.environ.get("PS_RECORD_URL", "redis://127.0.0.1:6379/0")
RECORD_KEY = os.environ.get("PS_RECORD_KEY", "ps-plugin:executed")
QUEUE = os.environ.get("PS_QUEUE", "ps-plugin")

app = worker_app(
    "plugin",
    BROKER_URL,
    task_default_queue=QUEUE,
    parallel_scheduler_eta_threshold=float(os.environ.get("PS_ETA_THRESHOLD", "1")),
    parallel_scheduler_poll_interval=0.1,
)
if os.environ.get("PS_BEAT_EVERY"):
    app.conf.beat_schedule = {
        "tick every second": {
            "task": "plugin.record",
            "schedule": timedelta(seconds=float(os.environ["PS_BEAT_EVERY"])),
            "args": ("beat",),
            "kwargs": {"n": "beat"},
        }
    }
parallel_scheduler.celery.install(app)
_records = redis.Redis.from_url(RECORD_URL)


@app.task(name="plugin.record", bind=True)  # type: ignore[untyped-decorator]
def record(self: Any, *args: Any, **kwargs: Any) -> None:
    _write(self, args, kwargs)


def _write(task: Any, args: Any, kwargs: Any) -> None:
    request = task.request
    delivery = request.delivery_info or {}
    entry = {
        "id": request.id,
        "task": task.name,
        "at": time.time(),
        "args": list(args),
        "kwargs": kwargs,
        "routing_key": delivery.get("routing_key"),
        "priority": delivery.get("priority"),
        "tenant": getattr(request, "x_tenant", None),
        "worker_pid": os.getppid(),
        "retries": request.retries,
        "root_id": request.root_id,
        "parent_id": request.parent_id,
        "group": request.group,
        "group_index": request.group_index,
    }
    _records.rpush(RECORD_KEY, json.dumps(entry))


@app.task(name="plugin.flaky", bind=True, max_retries=5)  # type: ignore[untyped-decorator]
def flaky(self: Any, *args: Any, delays: list[float]) -> None:
    """Records each run like ``record``, then retries with ``countdown=delays[n]`` while there
    is a next delay: so it runs ``len(delays) + 1`` times, the last with retries == len(delays)."""
    _write(self, args, {"delays": delays})
    if self.request.retries < len(delays):
        raise self.retry(countdown=delays[self.request.retries])


@app.task(name="plugin.fail")  # type: ignore[untyped-decorator]
def fail(*args: Any) -> None:
    raise RuntimeError("fails on purpose, so its link_error runs")


@worker_ready.connect  # type: ignore[untyped-decorator]
def _ready(sender: Any = None, **_: Any) -> None:
    _records.rpush(RECORD_KEY + ":ready", str(os.getpid()))
