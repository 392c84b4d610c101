"""The project's Celery app; the plugin is the ``install`` call and two ``parallel_scheduler_*``
settings, the tasks stay plain Celery tasks.

Every address comes from the environment, so the same code runs on Redis or RabbitMQ and against
SQLite, PostgreSQL or Redis storage without an edit.
"""

from __future__ import annotations

import os

from celery import Celery

import parallel_scheduler.celery

app = Celery(
    "proj",
    broker=os.environ.get("BROKER_URL", "redis://127.0.0.1:6379/0"),
    include=["proj.tasks"],
)
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    # One queue per deployment; the example's test gives every run its own.
    task_default_queue=os.environ.get("CELERY_QUEUE", "celery"),
    broker_connection_retry_on_startup=True,
    # Where delayed calls wait: any URL parallel-scheduler accepts (sqlite://, postgresql://,
    # redis://). A relative SQLite path is relative to each process's working directory.
    parallel_scheduler_storage_url=os.environ.get("STORAGE_URL", "sqlite:///proj-schedule.db"),
    # Calls due more than a minute ahead go to storage instead of a worker's memory.
    # PARALLEL_SCHEDULER_ETA_THRESHOLD in the environment overrides it without a code change.
    parallel_scheduler_eta_threshold=60,
)

parallel_scheduler.celery.install(app)
