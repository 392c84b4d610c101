"""A Celery app whose tasks use ``IdempotentTask``, run by a real ``celery worker`` in
``test_idempotent_task.py``. Everything comes from the environment, so each test has its own
queue, record keys and idempotency prefix.

Each task body appends its task id to ``<key>:runs`` when it starts; the skip hook appends
``<task id> <state>`` to ``<key>:skips``; so the test sees every delivery, run or skipped.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery.signals import worker_ready

from parallel_scheduler.celery import IdempotentTask
from tests.celery_apps import worker_app

BROKER_URL = os.environ.get("PS_IDEM_BROKER_URL", "redis://127.0.0.1:6379/0")
KEY = os.environ.get("PS_IDEM_KEY", "ps-idem")

app = worker_app(
    "idempotent",
    BROKER_URL,
    task_default_queue=os.environ.get("PS_IDEM_QUEUE", "ps-idem"),
    # The records live in the storage Redis, as they would for a user with a Redis storage.
    parallel_scheduler_storage_url=BROKER_URL,
    parallel_scheduler_idempotency_prefix=os.environ.get("PS_IDEM_PREFIX", "ps:idempotent"),
)
_records = redis.Redis.from_url(BROKER_URL)


class RecordedIdempotentTask(IdempotentTask):
    def on_duplicate(self, task_id: str, state: str) -> None:
        super().on_duplicate(task_id, state)
        _records.rpush(KEY + ":skips", f"{task_id} {state}")


@app.task(base=RecordedIdempotentTask, bind=True, name="idem.slow")  # type: ignore[untyped-decorator]
def slow(self: Any, seconds: float) -> None:
    _records.rpush(KEY + ":runs", str(self.request.id))
    time.sleep(seconds)


@app.task(base=RecordedIdempotentTask, bind=True, name="idem.flaky", max_retries=3)  # type: ignore[untyped-decorator]
def flaky(self: Any) -> None:
    _records.rpush(KEY + ":runs", str(self.request.id))
    if self.request.retries == 0:
        raise self.retry(countdown=0)
    _records.rpush(KEY + ":completed", str(self.request.id))


@worker_ready.connect  # type: ignore[untyped-decorator]
def _ready(**_: Any) -> None:
    _records.rpush(KEY + ":ready", str(os.getpid()))
