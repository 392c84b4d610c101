"""The Celery app of memory_1m.py's plugin worker: ``burst_app``'s recording task on an app with
parallel-scheduler installed, so ``celery -A memory_1m_app worker --parallel-scheduler`` runs the
plugin's scheduler bootstep inside the worker, over the benchmark's storage prefix.

Configured through environment variables the harness sets: ``BURST_BROKER_URL``,
``BURST_QUEUE``, ``BURST_RESULTS_URL``, ``BURST_RESULTS_KEY``, ``BURST_READY_DIR`` (read by
``burst_app``, whose import also connects the ready-file announcer) and ``MEM1M_STORAGE_URL``,
``MEM1M_PREFIX``.
"""

from __future__ import annotations

import os

from burst_app import build_celery_app

import parallel_scheduler.celery

ETA_THRESHOLD = 60  # seconds, as in worker_memory.py: far-future calls would be stored

app = build_celery_app(os.environ["BURST_BROKER_URL"], os.environ["BURST_QUEUE"])
app.conf.parallel_scheduler_storage_url = os.environ["MEM1M_STORAGE_URL"]
app.conf.parallel_scheduler_prefix = os.environ["MEM1M_PREFIX"]
app.conf.parallel_scheduler_eta_threshold = ETA_THRESHOLD
parallel_scheduler.celery.install(app)
