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
from celery import Celery
from celery.signals import worker_ready

import parallel_scheduler.celery

BROKER_URL = os.environ.get("PS_BROKER_URL", "redis://127.0.0.1:6379/0")
RECORD_URL = os.environ.get("PS_RECORD_URL", "redis://127.0.0.1:6379/0")
RECORD_KEY = os.environ.get("PS_RECORD_KEY", "ps-plugin:executed")
QUEUE = os.environ.get("PS_QUEUE", "ps-plugin")

app = Celery("plugin", broker=BROKER_URL)
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
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
    delivery = self.request.delivery_info or {}
    entry = {
        "id": self.request.id,
        "at": time.time(),
        "args": list(args),
        "kwargs": kwargs,
        "routing_key": delivery.get("routing_key"),
        "priority": delivery.get("priority"),
        "tenant": getattr(self.request, "x_tenant", None),
        "worker_pid": os.getppid(),
    }
    _records.rpush(RECORD_KEY, json.dumps(entry))


@worker_ready.connect  # type: ignore[untyped-decorator]
def _ready(sender: Any = None, **_: Any) -> None:
    _records.rpush(RECORD_KEY + ":ready", str(os.getpid()))
