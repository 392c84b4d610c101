"""How a due job reaches the broker: ``send_task`` per job (``CeleryDispatcher``), or a fast path
that sends a whole chunk in one round trip (``RedisPublisher`` for a Redis broker's lists,
``AmqpPublisher`` for RabbitMQ), both built from Celery's own message template.

Which one a scheduler uses is decided in ``parallel_scheduler.celery.wiring``.
"""

from __future__ import annotations

from parallel_scheduler.celery.publish.send_task import CeleryDispatcher

__all__ = ["CeleryDispatcher"]
