"""The Celery app the end-to-end tests run in a real ``celery worker`` process.

Its task records its own task id (the job id) and the time it ran into a Redis list, so the test
can count every execution.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import redis
from celery.signals import worker_ready

from tests.celery_apps import worker_app

BROKER_URL = os.environ.get("PS_E2E_BROKER_URL", "redis://127.0.0.1:6379/0")
RECORD_URL = os.environ.get("PS_E2E_RECORD_URL", "redis://127.0.0.1:6379/0")
RECORD_KEY = os.environ.get("PS_E2E_RECORD_KEY", "ps-e2e:executed")

app = worker_app("e2e", BROKER_URL, worker_prefetch_multiplier=16)
_records = redis.Redis.from_url(RECORD_URL)


@app.task(name="e2e.record", bind=True)
def record(self: Any, *args: Any, **kwargs: Any) -> None:
    entry = {
        "id": self.request.id,
        "at": time.time(),
        "args": list(args),
        "kwargs": kwargs,
        "queue": (self.request.delivery_info or {}).get("routing_key"),
        "priority": (self.request.delivery_info or {}).get("priority"),
    }
    _records.rpush(RECORD_KEY, json.dumps(entry))


@worker_ready.connect
def _ready(**_: Any) -> None:
    _records.set(RECORD_KEY + ":ready", "1")
