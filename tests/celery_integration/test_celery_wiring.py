"""The one place that decides how a Celery app's jobs are released: ``celery/wiring.py`` applying
``delayed/envelopes.py``'s rules to a real storage and broker pair.

- accept-time messages: only with ``fast_publish``, only for storage that releases by script
  (Redis), and only from a publisher that can build them (the Redis-list one);
- the one-script release: only for that storage with a Redis-list broker, into the broker's
  database when both share one Redis server;
- fast publish by default: the broker's one-round-trip publisher where it has one, else
  ``send_task`` (said at INFO), and the metrics label from the publisher in use.
"""

from __future__ import annotations

import logging

import pytest
from celery import Celery

from parallel_scheduler.celery.publish.amqp import AmqpPublisher
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.celery.wiring import dispatcher_for, envelopes_for
from parallel_scheduler.delayed.envelopes import script_release_for
from parallel_scheduler.dispatchers import CallableDispatcher, metrics_label, publish_description
from parallel_scheduler.settings import Settings
from storage_adapters import Storage
from tests.conftest import RABBITMQ_URL, REDIS_URL, require_server

FAST, SEND_TASK = Settings(fast_publish=True), Settings(fast_publish=False)


def test_accept_time_messages_only_with_storage_that_releases_by_script_or_transaction(
    storage: Storage, adapter_kind: str
) -> None:
    require_server("redis")
    redis_broker = Celery("wiring-redis", broker=REDIS_URL)
    maker = envelopes_for(redis_broker, FAST, storage)
    if adapter_kind in ("redis", "postgresql"):  # one-script release; one transaction per chunk
        assert isinstance(maker, RedisPublisher)
    else:  # SQLite: a stored message would make every claim and mark rewrite a larger row
        assert maker is None
    assert envelopes_for(redis_broker, SEND_TASK, storage) is None
    # the opt-out: messages built at release, stored jobs stay small
    assert envelopes_for(redis_broker, Settings(accept_time_messages=False), storage) is None
    amqp_broker = Celery("wiring-amqp", broker=RABBITMQ_URL)
    assert isinstance(dispatcher_for(amqp_broker, FAST), AmqpPublisher)
    assert envelopes_for(amqp_broker, FAST, storage) is None  # AMQP builds at release


def test_the_one_script_release_needs_redis_storage_and_a_redis_list_broker(
    storage: Storage, adapter_kind: str
) -> None:
    require_server("redis")
    app = Celery("wiring-script", broker=REDIS_URL)
    fast = dispatcher_for(app, FAST)
    release = script_release_for(storage, fast)
    if adapter_kind == "redis":
        # storage and broker are this same Redis server: the broker's database is the target
        assert release is not None and release.list_db() == 0
    else:
        assert release is None
    assert isinstance(dispatcher_for(app, SEND_TASK), CeleryDispatcher)
    assert script_release_for(storage, dispatcher_for(app, SEND_TASK)) is None


def test_by_default_each_broker_gets_its_fastest_publisher(
    storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    require_server("redis")
    caplog.set_level(logging.INFO, logger="parallel_scheduler.celery.wiring")
    default = Settings()
    # Given the default settings: a Redis or RabbitMQ broker gets its one-round-trip publisher,
    # labelled as such in the metrics and the start-up line
    redis_broker = Celery("wiring-default-redis", broker=REDIS_URL)
    amqp_broker = Celery("wiring-default-amqp", broker=RABBITMQ_URL)
    for app, kind in ((redis_broker, RedisPublisher), (amqp_broker, AmqpPublisher)):
        fast = dispatcher_for(app, default)
        assert isinstance(fast, kind)
        assert metrics_label(fast) == "fast_publish"
        assert publish_description(fast) == f"{kind.__name__}, one round trip per chunk"
    assert not caplog.records
    # Then any other broker falls back to send_task, said once at INFO and labelled "batch"
    other = Celery("wiring-default-memory", broker="memory://")
    fallback = dispatcher_for(other, default)
    assert isinstance(fallback, CeleryDispatcher)
    (said,) = caplog.records
    assert said.levelno == logging.INFO and "send_task" in said.getMessage()
    assert "memory://" in said.getMessage()
    assert metrics_label(fallback) == "batch"
    assert publish_description(fallback) == "CeleryDispatcher, one job at a time"
    # and builds no accept-time message and no one-script release
    assert envelopes_for(other, default, storage) is None
    assert script_release_for(storage, fallback) is None
    # and so does opting out, with nothing to say
    caplog.clear()
    assert isinstance(dispatcher_for(redis_broker, SEND_TASK), CeleryDispatcher)
    assert metrics_label(dispatcher_for(redis_broker, SEND_TASK)) == "batch"
    assert not caplog.records


def test_any_dispatcher_without_the_mark_is_labelled_one_job_at_a_time() -> None:
    # CallableDispatcher says so; a dispatcher of the user's own need not know the attribute
    class Own:
        def dispatch(self, job: object) -> None: ...

        def dispatch_many(self, jobs: object, keep_going: object = None) -> None: ...

    for dispatcher in (CallableDispatcher(lambda *call: None), Own()):
        assert metrics_label(dispatcher) == "batch"
