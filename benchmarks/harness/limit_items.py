"""What ``limits.py`` measures: every item (a project path, or the raw limit it is compared to),
its group, how one run of it goes, and the issue's targets.

Targets (issue 12): the defaults release at least 20,000 jobs/s from Redis and 12,000 jobs/s
from PostgreSQL; a PostgreSQL release at least 60 % of its limit; the one-script Redis release at
least 40 % of the Lua limit; accepting in bulk on PostgreSQL at least 60 % of ``executemany``,
one job per call at least 80 % of a single-row insert and commit; bulk on Redis at least 80 % of
the raw Lua accept; the RabbitMQ publishers at least 80 % of a raw publish.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.accept_runs import accept_once
from benchmarks.harness.celery_apps import build_celery_app
from benchmarks.harness.raw_amqp import amqp_messages, amqp_publish
from benchmarks.harness.raw_limits import (
    pg_accept,
    pg_release,
    redis_accept,
    redis_messages,
    redis_release,
)
from benchmarks.harness.release_runs import (
    DEFAULTS,
    ReleasePath,
    job_specs,
    release_once,
    run_prefix,
)

__all__ = ["ITEMS", "Item", "Run"]

Figures = tuple[float, float]  # jobs/s, CPU ms of this process per 1,000 jobs


@dataclass(frozen=True)
class Run:
    """One run's parameters: the command's options, its size and its seed."""

    args: argparse.Namespace
    jobs: int
    seed: int

    def specs(self, queue: str, countdown: float | None = None) -> list[Any]:
        return job_specs(self.jobs, self.seed, queue, self.args.token_chars, countdown)


@dataclass(frozen=True)
class Item:
    group: str
    name: str
    kind: str  # "limit" or "path"
    run: Callable[[Run], Figures]
    #: the limits of the same group this path is compared to, each with its target ratio
    compare: tuple[tuple[str, float | None], ...] = ()
    #: an absolute target, jobs/s
    floor: float | None = None
    #: one call per job: at most --single-jobs per run
    single: bool = False

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}"

    def max_jobs(self, args: argparse.Namespace) -> int:
        return int(args.single_jobs if self.single else args.jobs)


# -- release ---------------------------------------------------------------------------------


def _release(path: ReleasePath, storage: str, broker: str) -> Callable[[Run], Figures]:
    def run(r: Run) -> Figures:
        a = r.args
        return release_once(
            path,
            broker_url=getattr(a, f"{broker}_url"),
            storage_url=getattr(a, f"{storage}_url"),
            jobs=r.jobs,
            seed=r.seed,
            batch_size=a.batch_size,
            parallelism=a.parallelism,
            token_chars=a.token_chars,
        )

    return run


def _raw_redis_release(r: Run) -> Figures:
    queue = f"ps-bench-{run_prefix()}"
    url = r.args.redis_url
    return redis_release(url, queue, redis_messages(url, queue, r.specs(queue)), r.args.batch_size)


def _raw_pg_release(r: Run) -> Figures:
    queue = f"ps-bench-{run_prefix()}"
    a = r.args
    specs = r.specs(queue)
    jobs = [spec.encode(0.0) for spec in specs]  # due since 1970: due now
    messages = redis_messages(a.redis_url, queue, specs)
    return pg_release(a.postgresql_url, a.redis_url, queue, jobs, messages, a.batch_size)


def _raw_amqp(guarantee: str) -> Callable[[Run], Figures]:
    def run(r: Run) -> Figures:
        queue = f"ps-bench-amqp-{run_prefix()}"
        app = build_celery_app(r.args.amqp_url, queue, task="noop", isolated=False, name="bench")
        try:
            messages = amqp_messages(app, r.specs(queue))
        finally:
            app.close()
        return amqp_publish(r.args.amqp_url, queue, messages, guarantee, r.args.parallelism)

    return run


# -- accept ----------------------------------------------------------------------------------


def _accept(storage: str, shape: str, messages: bool = False) -> Callable[[Run], Figures]:
    def run(r: Run) -> Figures:
        url = getattr(r.args, f"{storage}_url")
        queue = f"ps-bench-{run_prefix()}"  # named in the messages only: nothing is sent
        app = build_celery_app(r.args.redis_url, queue, task="noop", isolated=False, name="bench")

        def publisher() -> Any:
            from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

            return RedisPublisher(app)

        try:
            specs = r.specs(queue, countdown=3600)
            made = accept_once(url, specs, shape=shape, envelopes=publisher if messages else None)
            return made["jobs_per_s"], made["cpu_ms_per_1000"]
        finally:
            app.close()

    return run


def _raw_accept(storage: str, how: str, messages: bool = False) -> Callable[[Run], Figures]:
    def run(r: Run) -> Figures:
        a = r.args
        queue = f"ps-bench-{run_prefix()}"
        specs = r.specs(queue, countdown=3600)
        jobs = [spec.encode(time.time()) for spec in specs]
        if storage == "postgresql":
            return pg_accept(a.postgresql_url, jobs, how)
        made = redis_messages(a.redis_url, queue, specs) if messages else None
        return redis_accept(a.redis_url, jobs, made, 1 if how == "single" else 1000)

    return run


RAW_LUA = "raw Lua: ZSET+HASH -> LIST, 1 script per batch"
RAW_PG = "raw UPDATE … SKIP LOCKED RETURNING + 1 LPUSH per batch"
ONE_SCRIPT = "one-script release (batch + fast publish + accept-time messages)"
TX, CONFIRMS = "raw py-amqp publish, 1 tx per 50", "raw py-amqp publish, confirms per 50"
EXECUTEMANY, COPY = "raw executemany, 1,000 rows per commit", "raw COPY, 1,000 rows per commit"
LUA_ACCEPT = "raw Lua accept, 1,000 jobs per script"
LUA_ACCEPT_MESSAGES = "raw Lua accept + message, 1,000 jobs per script"
BULK = "Client.schedule_many (1,000 per call)"

ITEMS: tuple[Item, ...] = (
    Item("redis-release", RAW_LUA, "limit", _raw_redis_release),
    Item(
        "redis-release",
        ONE_SCRIPT,
        "path",
        _release(ReleasePath("batch", "fast", True), "redis", "redis"),
        ((RAW_LUA, 0.40),),
    ),
    Item(
        "redis-release",
        "batch + fast publish",
        "path",
        _release(ReleasePath("batch", "fast", False), "redis", "redis"),
        ((RAW_LUA, None),),
    ),
    Item(
        "redis-release",
        "defaults (Settings())",
        "path",
        _release(DEFAULTS, "redis", "redis"),
        ((RAW_LUA, None),),
        floor=20_000,
    ),
    Item(
        "redis-release",
        "per_job + send_task",
        "path",
        _release(ReleasePath("per_job", "send_task", False), "redis", "redis"),
        ((RAW_LUA, None),),
    ),
    Item("pg-release", RAW_PG, "limit", _raw_pg_release),
    Item(
        "pg-release",
        "defaults (Settings())",
        "path",
        _release(DEFAULTS, "postgresql", "redis"),
        ((RAW_PG, 0.60),),
        floor=12_000,
    ),
    Item(
        "pg-release",
        "batch + fast publish",
        "path",
        _release(ReleasePath("batch", "fast", False), "postgresql", "redis"),
        ((RAW_PG, 0.60),),
    ),
    Item(
        "accept-pg-single",
        "raw INSERT + commit per job",
        "limit",
        _raw_accept("postgresql", "single"),
        single=True,
    ),
    Item(
        "accept-pg-single",
        "Client.schedule (one job per call)",
        "path",
        _accept("postgresql", "single"),
        (("raw INSERT + commit per job", 0.80),),
        single=True,
    ),
    Item("accept-pg-bulk", EXECUTEMANY, "limit", _raw_accept("postgresql", "executemany")),
    Item("accept-pg-bulk", COPY, "limit", _raw_accept("postgresql", "copy")),
    Item(
        "accept-pg-bulk",
        BULK,
        "path",
        _accept("postgresql", "bulk"),
        ((EXECUTEMANY, 0.60), (COPY, None)),
    ),
    Item(
        "accept-redis-single",
        "raw EVALSHA per job",
        "limit",
        _raw_accept("redis", "single"),
        single=True,
    ),
    Item(
        "accept-redis-single",
        "Client.schedule (one job per call)",
        "path",
        _accept("redis", "single"),
        (("raw EVALSHA per job", None),),
        single=True,
    ),
    Item("accept-redis-bulk", LUA_ACCEPT, "limit", _raw_accept("redis", "bulk")),
    Item("accept-redis-bulk", LUA_ACCEPT_MESSAGES, "limit", _raw_accept("redis", "bulk", True)),
    Item("accept-redis-bulk", BULK, "path", _accept("redis", "bulk"), ((LUA_ACCEPT, 0.80),)),
    Item(
        "accept-redis-bulk",
        f"{BULK} + accept-time messages",
        "path",
        _accept("redis", "bulk", True),
        ((LUA_ACCEPT_MESSAGES, 0.80),),
    ),
    Item("rabbitmq-release", TX, "limit", _raw_amqp("transaction")),
    Item("rabbitmq-release", CONFIRMS, "limit", _raw_amqp("confirms")),
    Item(
        "rabbitmq-release",
        "batch + AmqpPublisher (transaction)",
        "path",
        _release(ReleasePath("batch", "transaction", False), "redis", "amqp"),
        ((TX, 0.80),),
    ),
    Item(
        "rabbitmq-release",
        "batch + AmqpPublisher (confirms)",
        "path",
        _release(ReleasePath("batch", "confirms", False), "redis", "amqp"),
        ((CONFIRMS, 0.80),),
    ),
)
