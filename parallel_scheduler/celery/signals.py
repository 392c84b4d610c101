"""Celery-style signals of the plugin, for metrics, audit logs and tests.

Connect as to any Celery signal: ``@job_released.connect def on_release(sender, **kw): ...``.
``sender`` is the task name.
"""

from __future__ import annotations

from celery.utils.dispatch import Signal

__all__ = ["job_released", "job_scheduled"]

#: A call was stored durably instead of sent: ``job_id``, ``due_at`` (aware datetime), ``created``.
job_scheduled = Signal(
    name="parallel_scheduler.job_scheduled", providing_args={"job_id", "due_at", "created"}
)

#: A due job was handed to the broker: ``job_id``, ``due_at`` and ``sent_at`` (epoch seconds).
job_released = Signal(
    name="parallel_scheduler.job_released", providing_args={"job_id", "due_at", "sent_at"}
)
