"""The README's quick start as a project (scripts/package_check.py runs its worker and caller).

The broker and the storage are the test Redis; the queue and the storage prefix are unique to
one run, so it cannot meet other tests' tasks or jobs.
"""

from __future__ import annotations

import os

from celery import Celery

import parallel_scheduler.celery

app = Celery("proj", broker=os.environ["CHECK_REDIS_URL"])
app.conf.parallel_scheduler_storage_url = os.environ["CHECK_REDIS_URL"]
app.conf.parallel_scheduler_prefix = os.environ["CHECK_PREFIX"]
app.conf.parallel_scheduler_eta_threshold = 1  # seconds; None (default) intercepts nothing
app.conf.parallel_scheduler_poll_interval = 0.5
app.conf.task_default_queue = os.environ["CHECK_QUEUE"]
app.conf.worker_enable_remote_control = False
parallel_scheduler.celery.install(app)


@app.task(name="proj.record")
def record(what: str) -> None:
    """Leave a line in the file the check watches."""
    with open(os.environ["CHECK_RAN_FILE"], "a") as ran:
        ran.write(what + "\n")
