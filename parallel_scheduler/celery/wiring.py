"""Where a Celery app's scheduler is put together: the one place that reads the settings and the
storage/broker pair to decide

- **fast publish or send_task**: ``dispatcher_for`` picks, with ``fast_publish`` (the default),
  the broker's one-round-trip-per-chunk publisher where it has one (Redis, RabbitMQ), else
  ``CeleryDispatcher`` (``send_task`` per job);
- **accept-time messages or not**: ``envelopes_for`` gives a client the publisher that builds a
  job's broker message as the job is stored (``envelopes.envelope_maker_for`` says for which
  storage);
- **one-script release or not**: the scheduler finds it from the same pair through
  ``envelopes.script_release_for`` (storage and broker on one Redis server);

and ``build_service`` hands back a ready ``SchedulerService`` over freshly opened storage, with
the app's ``beat_schedule`` synced into it first.
"""

from __future__ import annotations

import logging
from typing import Any

from parallel_scheduler.celery.beat_sync import sync_beat_schedule
from parallel_scheduler.celery.publish.amqp import AmqpPublisher
from parallel_scheduler.celery.publish.broker_urls import (
    AMQP_SCHEMES,
    REDIS_SCHEMES,
    broker_scheme,
    masked_broker_url,
)
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.celery.routing import router_of
from parallel_scheduler.celery.signals import job_released
from parallel_scheduler.clock import StorageClock
from parallel_scheduler.delayed.envelopes import (
    EnvelopeMaker,
    envelope_maker_for,
    stores_envelopes,
    wants_envelopes,
)
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.log_format import event
from parallel_scheduler.opening_storage import open_storage
from parallel_scheduler.process.service import SchedulerService
from parallel_scheduler.recurring.jobs import RecurringJobs
from parallel_scheduler.settings import Settings
from storage_adapters import ClaimedJob, Storage

__all__ = ["build_service", "dispatcher_for", "envelopes_for"]

logger = logging.getLogger(__name__)
#: How long syncing ``beat_schedule`` at start keeps retrying unreachable storage.
_BEAT_SYNC_RETRY_FOR = 30.0


def dispatcher_for(app: Any, settings: Settings) -> Dispatcher:
    """``send_task`` per job, or with ``fast_publish`` (the default) the broker's
    one-round-trip-per-chunk path: ``RedisPublisher`` for a Redis broker, ``AmqpPublisher`` for
    RabbitMQ, and ``send_task`` after all, said at INFO, for any other broker."""
    if not settings.fast_publish:
        return CeleryDispatcher(app)
    scheme = broker_scheme(app)
    if scheme in AMQP_SCHEMES:
        return AmqpPublisher(app)
    if scheme in REDIS_SCHEMES:
        # imported here, not above: it needs the redis package, the optional [redis] extra,
        # which an app on RabbitMQ may not have installed
        from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

        return RedisPublisher(app)
    logger.info(
        "fast_publish: broker %s has no one-round-trip publisher (only Redis and RabbitMQ "
        "brokers do); publishing through send_task, one message at a time",
        masked_broker_url(app),
        extra=event(broker=masked_broker_url(app), publish="send_task"),
    )
    return CeleryDispatcher(app)


def envelopes_for(app: Any, settings: Settings, storage: Storage) -> EnvelopeMaker | None:
    """Who builds a stored call's broker message as it is accepted, or ``None``: only with
    ``fast_publish`` and ``accept_time_messages``, only for storage where that pays off
    (``stores_envelopes``), and only from a publisher that can build one (the Redis-list one)."""
    if not wants_envelopes(settings) or not stores_envelopes(storage):
        return None  # asked first: a publisher is not built (nor connected) for nothing
    return envelope_maker_for(storage, dispatcher_for(app, settings))


def build_service(app: Any, settings: Settings, owner: str | None = None) -> SchedulerService:
    """Both schedulers, sending through ``app``; fails at once on a bad storage URL."""
    storage = open_storage(settings)
    try:
        storage.setup()
        if app.conf.beat_schedule:
            recurring = RecurringJobs(
                storage, StorageClock(storage), settings.max_payload_bytes, _BEAT_SYNC_RETRY_FOR
            )
            recurring.outcomes_recorded = settings.record_outcomes  # what overlap needs
            sync_beat_schedule(app, recurring)
    except BaseException:
        storage.close()
        raise
    return SchedulerService.build(
        storage,
        dispatcher_for(app, settings),
        settings,
        owner=owner,
        listeners=(_announce_release,),
        owns_storage=True,
        route=router_of(app),  # a firing is held by a pause of the queue it will be sent to
    )


def _announce_release(job: ClaimedJob, sent_at: float) -> None:
    logger.debug("released job %s (task %s)", job.id, job.task)
    if job_released.receivers:
        job_released.send(sender=job.task, job_id=job.id, due_at=job.due_at, sent_at=sent_at)
