"""Celery integration: ``install(app)`` and everything it plugs in.

app = Celery("proj")
parallel_scheduler.celery.install(app)          # reads app.conf.parallel_scheduler_*
add.apply_async((1, 2), countdown=86_400)        # stored durably beyond eta_threshold
add.schedule((1, 2), countdown=60)               # always stored durably
app.parallel_scheduler.cancel(result.id)

The modules, each importing only those below it: ``install`` (install(app)) -> ``bootstep``,
``beat`` and ``command`` (the three ways to run a scheduler) -> ``integration`` (settings,
client, schedule/cancel) -> ``wiring`` (which dispatcher, accept-time messages, the service) ->
``beat_sync`` (beat_schedule -> recurring jobs) and ``publish/`` (how a due job reaches the
broker: ``send_task``, ``redis_lists``, ``amqp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parallel_scheduler.celery.app_loading import app_for_broker, load_app
from parallel_scheduler.celery.install import install
from parallel_scheduler.celery.integration import CeleryIntegration, get_integration
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.celery.signals import job_released, job_scheduled
from storage_adapters.extras import require_driver

if TYPE_CHECKING:
    from parallel_scheduler.celery.idempotent import IdempotentTask

__all__ = [
    "CeleryDispatcher",
    "CeleryIntegration",
    "IdempotentTask",
    "app_for_broker",
    "get_integration",
    "install",
    "job_released",
    "job_scheduled",
    "load_app",
]


def __getattr__(name: str) -> Any:
    """``IdempotentTask`` loads on first use: it needs the Redis driver (the ``[redis]`` extra),
    which an app on another broker and storage may not have installed."""
    if name == "IdempotentTask":
        require_driver("redis", "IdempotentTask")
        from parallel_scheduler.celery.idempotent import IdempotentTask

        return IdempotentTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
