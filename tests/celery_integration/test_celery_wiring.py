"""The one place that decides how a Celery app's jobs are released: ``celery/wiring.py`` applying
``envelopes.py``'s rules to a real storage and broker pair.

- accept-time messages: only with ``fast_publish``, only for storage that releases by script
  (Redis), and only from a publisher that can build them (the Redis-list one);
- the one-script release: only for that storage with a Redis-list broker, into the broker's
  database when both share one Redis server.
"""

from __future__ import annotations

from celery import Celery

from parallel_scheduler.celery.publish.amqp import AmqpPublisher
from parallel_scheduler.celery.publish.redis_lists import RedisPublisher
from parallel_scheduler.celery.publish.send_task import CeleryDispatcher
from parallel_scheduler.celery.wiring import dispatcher_for, envelopes_for
from parallel_scheduler.envelopes import script_release_for
from parallel_scheduler.settings import Settings
from storage_adapters import Storage
from tests.conftest import RABBITMQ_URL, REDIS_URL, require_server

FAST, SEND_TASK = Settings(fast_publish=True), Settings(fast_publish=False)


def test_accept_time_messages_only_with_storage_that_releases_by_script(
    storage: Storage, adapter_kind: str
) -> None:
    require_server("redis")
    redis_broker = Celery("wiring-redis", broker=REDIS_URL)
    maker = envelopes_for(redis_broker, FAST, storage)
    if adapter_kind == "redis":
        assert isinstance(maker, RedisPublisher)
    else:  # SQL: a stored message would make every claim and mark rewrite a larger row
        assert maker is None
    assert envelopes_for(redis_broker, SEND_TASK, storage) is None
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
