"""Celery integration: ``install(app)`` and everything it plugs in.

app = Celery("proj")
parallel_scheduler.celery.install(app)          # reads app.conf.parallel_scheduler_*
add.apply_async((1, 2), countdown=86_400)        # stored durably beyond eta_threshold
add.schedule((1, 2), countdown=60)               # always stored durably
app.parallel_scheduler.cancel(result.id)
"""

from __future__ import annotations

from .app_loading import app_for_broker, load_app
from .idempotent import IdempotentTask
from .integration import CeleryIntegration, get_integration, install
from .signals import job_released, job_scheduled

__all__ = [
    "CeleryIntegration",
    "IdempotentTask",
    "app_for_broker",
    "get_integration",
    "install",
    "job_released",
    "job_scheduled",
    "load_app",
]
