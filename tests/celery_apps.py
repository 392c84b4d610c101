"""The one factory of the Celery apps that the tests' real ``celery worker`` processes run.

Every test app (``tests/celery_integration/*_celery_app.py``, ``tests/faults/worker_app.py``)
shares the same base: JSON only, no results, and a worker that keeps retrying the broker at start
(the fault tests start workers while a broker is down). Each app adds only what it is about.
"""

from __future__ import annotations

import sys
from typing import Any

from celery import Celery

BASE_CONF: dict[str, Any] = {
    "task_serializer": "json",
    "accept_content": ["json"],
    "task_ignore_result": True,
    "broker_connection_retry_on_startup": True,
}


def worker_app(name: str, broker_url: str, **conf: Any) -> Celery:
    """A Celery app named ``name`` on ``broker_url`` with the base settings, then ``conf``."""
    app = Celery(name, broker=broker_url)
    app.conf.update(BASE_CONF, **conf)
    return app


def worker_command(
    app: str, queues: str, hostname: str, *extra: str, loglevel: str = "INFO"
) -> list[str]:
    """``celery -A <app> worker`` on ``queues`` with two processes and without gossip, mingle
    and heartbeat, which would couple it to other tests' workers on the same broker."""
    return [
        sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues, "-c", "2",
        "--without-gossip", "--without-mingle", "--without-heartbeat", f"--loglevel={loglevel}",
        f"--hostname={hostname}@%h", *extra,
    ]  # fmt: skip
