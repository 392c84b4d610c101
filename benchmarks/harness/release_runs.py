"""One checked release run: N due jobs stored, one scheduler pass drains them into a fresh broker
queue, and the figure is kept only once storage and broker agree that every job went exactly
once. ``release_throughput.py`` and ``limits.py`` both measure through ``release_once``.

A ``ReleasePath`` names what a user would configure: the release mode, the dispatcher and
whether broker messages are built at accept time; ``ReleasePath.DEFAULTS`` is ``Settings()`` as
it is at run time, wired the way the Celery integration wires it (``wiring.dispatcher_for`` and
``wiring.envelopes_for``), so the figure follows the defaults whatever they become.
"""

from __future__ import annotations

import random
import resource
import time
import uuid
from dataclasses import dataclass
from typing import Any

import redis

import storage_adapters
from benchmarks.harness.amqp import drain_ids, queue_count
from benchmarks.harness.brokers import delete_celery_queue, is_redis, queued_ids
from benchmarks.harness.celery_apps import build_celery_app
from parallel_scheduler import CeleryDispatcher, DelayedJobScheduler, JobState, Settings
from parallel_scheduler.delayed.envelopes import EnvelopeMaker, with_envelopes
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.jobs import JobSpec
from storage_adapters import NewJob, Storage

__all__ = [
    "DEFAULTS",
    "CheckFailed",
    "ReleasePath",
    "cpu_seconds",
    "due_jobs",
    "expect_each_once",
    "job_specs",
    "release_once",
    "remove_queue",
    "run_prefix",
]


class CheckFailed(Exception):
    """A run's oracle failed: its figure is not kept."""


@dataclass(frozen=True)
class ReleasePath:
    #: ``per_job`` or ``batch``; ``None``: whatever ``Settings()`` says
    release_mode: str | None
    #: ``send_task``, ``fast`` (Redis), ``transaction``/``confirms`` (AMQP), or ``defaults``
    dispatcher: str
    #: broker messages built at accept time (``None``: as the Celery integration decides)
    envelopes: bool | None

    @property
    def defaults(self) -> bool:
        return self.dispatcher == "defaults"


#: ``Settings()`` at run time, wired as the Celery integration wires it
DEFAULTS = ReleasePath(None, "defaults", None)


def cpu_seconds() -> float:
    """This process's CPU time (user + system): the releasing process's, in these runs."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_prefix(kind: str = "bench") -> str:
    """A fresh storage prefix (and queue name part) per run, deleted afterwards."""
    return kind + uuid.uuid4().hex[:8]


def job_specs(
    count: int,
    seed: int,
    queue: str,
    token_chars: int | None = None,
    countdown: float | None = None,
) -> list[JobSpec]:
    """Ids ``j0``..., arguments from ``seed``. ``token_chars``: a hex token of that length as the
    second argument (a payload of about ``token_chars`` + 60 bytes); ``None`` keeps the small
    shape release_throughput's published figures were measured with (a random float)."""
    rng = random.Random(seed)

    def token() -> object:
        return rng.random() if token_chars is None else rng.randbytes(token_chars // 2).hex()

    return [
        JobSpec(
            "bench.noop",
            args=[i, token()],
            kwargs={"k": "v" * 8},
            options={"queue": queue},
            id=f"j{i}",
            countdown=countdown,
        )
        for i in range(count)
    ]


def due_jobs(storage: Storage, specs: list[JobSpec]) -> list[NewJob]:
    """The specs encoded as due one second ago on the storage clock."""
    now = storage.now()
    return [spec.encode(now - 1) for spec in specs]


def expect_each_once(what: str, ids: dict[str, int], jobs: int) -> None:
    """The broker's oracle: ``ids`` (id -> copies) holds each of ``j0``.. ``j{jobs-1}`` once."""
    held = sum(ids.values())
    if held != jobs or set(ids) != {f"j{i}" for i in range(jobs)} or max(ids.values()) != 1:
        raise CheckFailed(f"{what}: the queue held {held} messages, not each of {jobs} jobs once")


def broker_ids(broker_url: str, queue: str, jobs: int) -> dict[str, int]:
    """Every job id in the queue, once per message (RabbitMQ: consumed)."""
    if is_redis(broker_url):
        return dict(queued_ids(redis.Redis.from_url(broker_url), queue))
    return dict(drain_ids(broker_url, queue, jobs)[1])


def remove_queue(broker_url: str, queue: str) -> None:
    delete_celery_queue(broker_url, queue)
    if is_redis(broker_url):  # priority lists and bindings kombu may have made
        broker = redis.Redis.from_url(broker_url)
        for key in broker.scan_iter(match=f"{queue}*"):
            broker.delete(key)


def _dispatcher(kind: str, app: Any, settings: Settings) -> Dispatcher:
    if kind == "defaults":
        from parallel_scheduler.celery.wiring import dispatcher_for

        return dispatcher_for(app, settings)
    if kind == "send_task":
        return CeleryDispatcher(app)
    if kind == "fast":
        from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

        return RedisPublisher(app)
    from parallel_scheduler.celery.publish.amqp import AmqpPublisher

    return AmqpPublisher(app, guarantee=kind)  # type: ignore[arg-type]


def _settings(path: ReleasePath, batch_size: int, parallelism: int) -> Settings:
    if path.defaults:
        return Settings()
    return Settings(
        release_mode=path.release_mode,  # type: ignore[arg-type]
        batch_size=batch_size,
        max_degree_of_parallelism=parallelism,
    )


def _maker(
    path: ReleasePath, app: Any, settings: Settings, storage: Storage, dispatcher: Dispatcher
) -> EnvelopeMaker | None:
    if path.defaults:
        from parallel_scheduler.celery.wiring import envelopes_for

        return envelopes_for(app, settings, storage)
    return dispatcher if path.envelopes else None  # type: ignore[return-value]


def release_once(
    path: ReleasePath,
    *,
    broker_url: str,
    storage_url: str,
    jobs: int,
    seed: int,
    batch_size: int = 1000,
    parallelism: int = 4,
    token_chars: int | None = None,
) -> tuple[float, float]:
    """jobs/s, and this process's CPU milliseconds per 1,000 jobs released (the scheduler and its
    pool run here); ``CheckFailed`` unless
    storage holds every job Enqueued (nothing Scheduled or Claimed) and the queue each once."""
    prefix = run_prefix()
    amqp = not is_redis(broker_url)
    queue = f"ps-bench-{'amqp-' if amqp else ''}{prefix}"
    settings = _settings(path, batch_size, parallelism)
    storage = storage_adapters.from_url(
        storage_url, prefix=prefix, pool_size=settings.max_degree_of_parallelism
    )
    storage.setup()
    app = build_celery_app(broker_url, queue, name="bench", isolated=False, task="noop")
    dispatcher = _dispatcher(path.dispatcher, app, settings)
    try:
        maker = _maker(path, app, settings, storage, dispatcher)
        new_jobs = due_jobs(storage, job_specs(jobs, seed, queue, token_chars))
        for first in range(0, jobs, 5000):
            storage.add_jobs(with_envelopes(new_jobs[first : first + 5000], maker))
        scheduler = DelayedJobScheduler(storage, dispatcher, settings)
        started, cpu = time.perf_counter(), cpu_seconds()
        stats = scheduler.run_once()
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        kind = path.dispatcher
        at_return = queue_count(broker_url, queue) if amqp else jobs
        scheduler.close()
        counts = storage.count_by_state()  # the oracles, before the figure is kept
        if counts[JobState.ENQUEUED] != jobs or sum(counts.values()) != jobs:
            raise CheckFailed(f"{path}: storage holds {dict(counts)}, expected {jobs} enqueued")
        if stats.released != jobs:
            raise CheckFailed(f"{path}: the pass released {stats.released} of {jobs}")
        if kind in ("transaction", "confirms") and at_return != jobs:
            raise CheckFailed(f"{path}: the pass returned with {at_return} of {jobs} queued")
        expect_each_once(str(path), broker_ids(broker_url, queue, jobs), jobs)
        return jobs / elapsed, cpu * 1e6 / jobs
    finally:
        close = getattr(dispatcher, "close", None)
        if amqp and close is not None:
            close()
        remove_queue(broker_url, queue)
        storage.drop()
        storage.close()
        app.close()
