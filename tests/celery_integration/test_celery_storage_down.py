"""Storage unreachable when ``apply_async`` is called: the caller waits about ``connect_timeout``,
then gets ``StorageUnavailableError`` (of the project's one exception tree), or, with
``fallback_to_celery``, the call goes to Celery's own eta path with a WARNING.

How long the caller waits is counted, not timed where it can be (a loaded CI machine makes a
wall-clock ceiling flaky): the retries' budget is the sum of the waits the retry policy announced
in its WARNING lines, which stays within ``connect_timeout`` however long each attempt took (it
was 5.4 s when the budget was a constant). Only the one attempt's own timeout, against a server
that never answers, is timed, with an allowance scaled by ``SLOW_MACHINE_FACTOR``; a loopback
listener counts that it was one attempt.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

import parallel_scheduler.celery
from devtools.waiting import wait_until
from parallel_scheduler import ParallelSchedulerError, StorageUnavailableError
from tests.celery_integration.celery_cluster import Cluster
from tests.conftest import REDIS_URL, SLOW_MACHINE_FACTOR, require_server
from tests.loopback import CountingListener
from tests.retry_warnings import RETRY_LOGGER, announced_waits

pytestmark = [pytest.mark.celery, pytest.mark.redis]

#: Nothing listens on port 1: every connection attempt is refused at once.
UNREACHABLE = {
    "redis": "redis://127.0.0.1:1/0",
    "postgresql": "postgresql://postgres:hunter2@127.0.0.1:1/test",
}
#: The default ``connect_timeout`` setting, in seconds: the caller's whole retry budget too.
CONNECT_TIMEOUT = 2.0
#: What a silent server cost before each attempt was bounded by ``connect_timeout``: the
#: driver's own default wait.
DRIVER_DEFAULT_WAIT = 10.0


@pytest.fixture
def queue() -> Iterator[str]:
    require_server("redis")
    name = f"ps-down-{uuid.uuid4().hex[:10]}"
    yield name
    redis.Redis.from_url(REDIS_URL).delete(name)


def producer(queue: str, storage_url: str, **overrides: object) -> Celery:
    app = Celery("producer", broker=REDIS_URL)
    app.conf.update(task_serializer="json", task_default_queue=queue)
    parallel_scheduler.celery.install(app, storage_url=storage_url, eta_threshold=1.0, **overrides)

    # registered, so no "not registered" warning whatever shared tasks other modules defined
    @app.task(name="plugin.record", shared=False)  # type: ignore[untyped-decorator]
    def record(*args: object) -> None:
        raise AssertionError("never runs here")

    return app


@pytest.mark.parametrize("kind", sorted(UNREACHABLE))
def test_a_call_fails_within_the_connect_timeout(
    queue: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    app = producer(queue, UNREACHABLE[kind])
    with pytest.raises(StorageUnavailableError) as raised:
        app.send_task("plugin.record", (1,), countdown=600)
    waits = announced_waits(caplog)
    assert waits, caplog.text  # refused at once: it was retried ...
    assert sum(waits) < CONNECT_TIMEOUT, waits  # ... and connect_timeout bounds the retries too
    assert isinstance(raised.value, ParallelSchedulerError)
    message = str(raised.value)
    assert "'plugin.record' was not stored, nor sent" in message
    assert "127.0.0.1:1" in message and "hunter2" not in message
    assert "fallback_to_celery" in message
    assert redis.Redis.from_url(REDIS_URL).llen(queue) == 0  # nothing went to the broker


def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout(queue: str) -> None:
    # A listening socket that never answers: the TCP connect succeeds, the handshake never ends
    # (what a hung or firewalled server looks like); the driver's own default waited 10 s.
    # The one attempt's timeout is time itself: timed, with the one documented allowance
    allowance = CONNECT_TIMEOUT * SLOW_MACHINE_FACTOR
    assert allowance < DRIVER_DEFAULT_WAIT, "SLOW_MACHINE_FACTOR too large to catch the regression"
    with CountingListener("silent") as silent:
        app = producer(queue, f"postgresql://postgres@127.0.0.1:{silent.port}/test")
        started = time.monotonic()
        with pytest.raises(StorageUnavailableError, match="timeout"):
            app.send_task("plugin.record", countdown=600)
        waited = time.monotonic() - started
        assert silent.connections == 1  # one attempt: its timeout used up the whole budget
    assert waited < allowance, f"waited {waited:.2f} s for a {CONNECT_TIMEOUT:g} s timeout"


def test_a_shorter_connect_timeout_is_honoured(
    queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=RETRY_LOGGER)
    app = producer(queue, UNREACHABLE["redis"], connect_timeout=0.5)
    with pytest.raises(StorageUnavailableError):
        app.send_task("plugin.record", countdown=600)
    waits = announced_waits(caplog)
    assert sum(waits) < 0.5, waits  # the retries' budget is the shorter timeout, not 2 s


def test_the_fallback_hands_the_call_to_celery_with_a_warning(
    queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = producer(queue, UNREACHABLE["redis"], fallback_to_celery=True)
    with caplog.at_level(logging.WARNING, logger="parallel_scheduler.celery.install"):
        result = app.send_task("plugin.record", (7,), countdown=600)
    warnings = [r for r in caplog.records if r.name == "parallel_scheduler.celery.install"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "goes to Celery's own eta path (fallback_to_celery)" in warnings[0].getMessage()
    assert "127.0.0.1:1" in warnings[0].getMessage()
    messages = [json.loads(m) for m in redis.Redis.from_url(REDIS_URL).lrange(queue, 0, -1)]
    assert [m["headers"]["id"] for m in messages] == [result.id]
    assert messages[0]["headers"]["eta"]  # Celery's own eta message, as without the plugin


def test_schedule_never_falls_back(queue: str) -> None:
    # task.schedule() promises durable storage: with storage down it raises even with fallback
    app = producer(queue, UNREACHABLE["redis"], fallback_to_celery=True)
    with pytest.raises(StorageUnavailableError):
        app.tasks["plugin.record"].schedule((1,), countdown=600)
    assert redis.Redis.from_url(REDIS_URL).llen(queue) == 0


def test_a_retry_with_storage_down_goes_to_celery_rather_than_being_lost(
    redis_cluster: Cluster,
) -> None:
    # Celery rejects (drops) a task whose retry cannot be sent, so a retry falls back even
    # without fallback_to_celery
    redis_cluster.env["PARALLEL_SCHEDULER_STORAGE_URL"] = UNREACHABLE["redis"]
    redis_cluster.start_worker()
    redis_cluster.wait_ready(1)
    app = redis_cluster.producer()
    result = app.send_task("plugin.flaky", ("x",), {"delays": [1.5]})
    wait_until(lambda: len(redis_cluster.executions()) == 2, timeout=30)
    runs = redis_cluster.executions()
    assert [(r["id"], r["retries"]) for r in runs] == [(result.id, 0), (result.id, 1)]
    log = next(redis_cluster.tmp_path.glob("w0-*.log")).read_text()
    assert "goes to Celery's own eta path (a retry is never dropped)" in log
