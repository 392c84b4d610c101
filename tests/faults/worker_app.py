"""The Celery app a real ``celery worker`` runs in the broker-outage test.

Its one task appends its task id (the job id) to a Redis list on a server that is not the
broker, so executions are counted even while the broker is down.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery.signals import worker_ready

from tests.celery_apps import worker_app

BROKER_URL = os.environ["FAULTS_BROKER_URL"]
RECORD_URL = os.environ["FAULTS_RECORD_URL"]
RECORD_KEY = os.environ["FAULTS_RECORD_KEY"]

app = worker_app("faults", BROKER_URL, worker_prefetch_multiplier=4)
_records = redis.Redis.from_url(RECORD_URL)


@app.task(name="faults.record", bind=True)  # type: ignore[untyped-decorator]
def record(self: Any, *args: Any, **kwargs: Any) -> None:
    _records.rpush(RECORD_KEY, str(self.request.id))


@worker_ready.connect  # type: ignore[untyped-decorator]
def _ready(**_: Any) -> None:
    _records.rpush(RECORD_KEY + ":ready", str(os.getpid()))
