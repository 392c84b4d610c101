"""Micro-benchmarks of the release path's hot spots, per storage adapter, on real servers.

They tell which step a burst spends its time in: accepting a bulk write, finding due ids, the
per-job claim (``per_job`` mode) versus one set-based claim plus acknowledgement (``batch``
mode), and handing one job to the broker. Skipped by the default test run (``--benchmark-skip``
in the pytest options); run them with

    .venv/bin/python -m pytest tests/benchmarks --benchmark-enable --benchmark-only -p no:randomly

Rounds are few and explicit: each round of a stateful step needs fresh jobs, made in an untimed
set-up, and the suite must stay cheap on a shared two-core machine.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from parallel_scheduler import CeleryDispatcher
from storage_adapters import ClaimedJob, LockLease, NewJob, Storage
from tests.conftest import REDIS_URL, require_server

BATCH = 1000
PAYLOAD = '{"args":[1,"abcdefabcdefabcdefabcdefabcdefab"],"kwargs":{},"options":{}}'
TASK = "bench.noop"
Args = tuple[tuple[Any, ...], dict[str, Any]]


def new_jobs(count: int, due_at: float) -> list[NewJob]:
    return [NewJob(str(uuid.uuid4()), TASK, PAYLOAD, due_at) for _ in range(count)]


def add_due(storage: Storage, count: int) -> list[NewJob]:
    """``count`` jobs already due (ten seconds in the past on the storage clock)."""
    jobs = new_jobs(count, storage.now() - 10.0)
    storage.add_jobs(jobs)
    return jobs


@pytest.fixture
def lock(storage: Storage) -> LockLease:
    held = storage.acquire_lock("delayed-scheduler", "benchmark", 300.0)
    assert held is not None
    return held


def test_add_jobs_1000(benchmark: Any, storage: Storage) -> None:
    due_at = storage.now() + 3600.0

    def fresh() -> Args:
        return (new_jobs(BATCH, due_at),), {}

    created = benchmark.pedantic(storage.add_jobs, setup=fresh, rounds=8, iterations=1)
    assert all(created)


def test_fetch_due_ids_1000(benchmark: Any, storage: Storage) -> None:
    add_due(storage, BATCH)
    ids = benchmark.pedantic(storage.fetch_due_ids, args=(BATCH,), rounds=20, iterations=1)
    assert len(ids) == BATCH


def test_claim_one_job(benchmark: Any, storage: Storage, lock: LockLease) -> None:
    """The per-job lock of ``per_job`` mode: one due job, one claim."""

    def one_due() -> Args:
        (job,) = add_due(storage, 1)
        return (job.id, lock, 30.0), {}

    claim = benchmark.pedantic(storage.claim, setup=one_due, rounds=100, iterations=1)
    assert claim is not None


def test_claim_due_1000_and_mark_enqueued(
    benchmark: Any, storage: Storage, lock: LockLease
) -> None:
    """``batch`` mode's storage work for one full batch: one claim, one acknowledgement."""

    def claim_and_mark() -> list[str]:
        claims = storage.claim_due(BATCH, lock, 30.0)
        return storage.mark_enqueued(claims)

    def batch_due() -> Args:
        add_due(storage, BATCH)
        return (), {}

    marked = benchmark.pedantic(claim_and_mark, setup=batch_due, rounds=6, iterations=1)
    assert len(marked) == BATCH


# -- the hand-off to a Redis broker ------------------------------------------------------------


@pytest.fixture
def celery_app() -> Iterator[Any]:
    """A Celery app on the test Redis, sending to a queue no one else uses; removed afterwards."""
    require_server("redis")
    from celery import Celery

    queue = f"ps-bench-{uuid.uuid4().hex[:12]}"
    app = Celery("hot-paths", broker=REDIS_URL, set_as_current=False)
    app.conf.update(task_serializer="json", task_default_queue=queue, task_ignore_result=True)
    yield app
    app.close()
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(queue, f"_kombu.binding.{queue}")
    client.close()


def _bench_dispatch(benchmark: Any, dispatch: Callable[[ClaimedJob], None]) -> None:
    """One fresh job per round, so each send is a new task id, as in a real release."""

    def one_job() -> Args:
        return (ClaimedJob(str(uuid.uuid4()), TASK, PAYLOAD, 0.0, 1, 1),), {}

    benchmark.pedantic(dispatch, setup=one_job, rounds=300, iterations=1, warmup_rounds=10)


@pytest.mark.redis
def test_dispatch_one_job_celery_dispatcher(benchmark: Any, celery_app: Any) -> None:
    _bench_dispatch(benchmark, CeleryDispatcher(celery_app).dispatch)


@pytest.mark.redis
def test_dispatch_one_job_redis_publisher(benchmark: Any, celery_app: Any) -> None:
    """The set-based Redis publisher, where this checkout has it."""
    publisher = pytest.importorskip("parallel_scheduler.celery.publish.redis_lists")
    _bench_dispatch(benchmark, publisher.RedisPublisher(celery_app).dispatch)
