"""The Celery app of ``parallel-scheduler demo``: on the demo's own Redis or a filesystem broker.

The worker subprocess finds the broker in ``PARALLEL_SCHEDULER_DEMO_BROKER`` (a Redis URL), or
uses the demo's filesystem broker when it is unset.

Its one task appends its own task id (which is the job id) to a file per worker process, so the
demo can count every execution and find any job that ran twice or never.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from celery import Celery
from celery.signals import worker_ready

from parallel_scheduler.demo.transport import ALIAS

DEMO_DIR = Path(os.environ.get("PARALLEL_SCHEDULER_DEMO_DIR", ".parallel-scheduler-demo"))
#: The broker URL the demo gives its worker; unset: the filesystem broker in ``DEMO_DIR``.
BROKER_ENV = "PARALLEL_SCHEDULER_DEMO_BROKER"
QUEUE = "demo"
TASK = "parallel_scheduler.demo.record"


def broker_folders(workdir: Path) -> dict[str, object]:
    queue_dir = workdir / "broker"
    control_dir = workdir / "control"  # kombu's default is ./control, beside the user's files
    queue_dir.mkdir(parents=True, exist_ok=True)
    control_dir.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(queue_dir),
        "data_folder_out": str(queue_dir),
        "control_folder": str(control_dir),
        "store_processed": False,
        "polling_interval": 0.005,
    }


def make_app(workdir: Path, broker_url: str | None = None) -> Celery:
    """The demo's app on ``broker_url`` (Redis), or on the filesystem broker in ``workdir``."""
    app = Celery("parallel_scheduler_demo", broker=broker_url or f"{ALIAS}://localhost/")
    app.conf.update(
        broker_transport_options={} if broker_url else broker_folders(workdir),
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=QUEUE,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=64,
        broker_connection_retry_on_startup=True,
    )
    return app


app = make_app(DEMO_DIR, os.environ.get(BROKER_ENV) or None)
_log: TextIO | None = None


@app.task(name=TASK, bind=True)  # type: ignore[untyped-decorator]
def record(self: Any) -> None:
    global _log
    if _log is None:
        _log = (DEMO_DIR / f"executed-{os.getpid()}.log").open("a", buffering=1)
    _log.write(f"{self.request.id}\n")


@worker_ready.connect  # type: ignore[untyped-decorator]
def _announce_ready(**_: Any) -> None:
    (DEMO_DIR / "worker-ready").write_text(str(os.getpid()))
