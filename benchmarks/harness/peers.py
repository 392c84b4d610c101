"""The peers the burst benchmark compares parallel-scheduler with: plain Celery countdowns, rq's
built-in scheduler and huey, each driven through its own public API (see ``systems.System``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone

import redis

from benchmarks.harness.brokers import delete_celery_queue, is_redis
from benchmarks.harness.celery_apps import CELERY_TASK, build_celery_app, ready_count
from benchmarks.harness.systems import ParallelScheduler, RunContext, System, scenario_environment
from benchmarks.harness.workloads import PlannedJob
from devtools.processes import start_process
from devtools.waiting import seconds_until

__all__ = ["PEERS", "SYSTEMS", "parse_peers"]


def _need_redis(peer: str, broker_url: str) -> None:
    if not is_redis(broker_url):
        raise SystemExit(f"burst: {peer} needs a Redis broker URL")


# -- plain Celery: send_task with a countdown ------------------------------------------------------


class CeleryEta(System):
    name = "Celery countdown (ETA)"
    release_note = "n/a: the worker holds every ETA message and releases it itself"

    def start(self, ctx: RunContext) -> None:
        self._app = build_celery_app(self.cfg.broker_url, ctx.queue)
        self._start_celery_workers(ctx)

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        """One producer (one broker connection) for the call: Celery's cheapest way to send many."""
        with self._app.producer_or_acquire() as producer:
            for job in jobs:
                self._app.send_task(
                    CELERY_TASK,
                    args=[job.index, job.token],
                    task_id=job.id,
                    countdown=job.due_at - time.time(),
                    producer=producer,
                )
        return len(jobs)

    def clean(self, ctx: RunContext) -> None:
        delete_celery_queue(self.cfg.broker_url, ctx.queue)
        if hasattr(self, "_app"):
            self._app.close()


# -- rq's built-in scheduler -----------------------------------------------------------------------


class RqScheduler(System):
    name = "rq (built-in scheduler)"
    release_note = "job.enqueued_at, stamped by rq's scheduler (local clock)"

    def start(self, ctx: RunContext) -> None:
        from rq import Queue

        _need_redis("rq", self.cfg.broker_url)
        self._redis = redis.Redis.from_url(self.cfg.broker_url)
        self._queue = Queue(ctx.queue, connection=self._redis)
        self._ids: list[str] = []
        env = scenario_environment(ctx, self.cfg)
        for i in range(self.cfg.workers):
            # SimpleWorker runs jobs in the worker process itself, as Celery's solo pool does;
            # rq's default forks once per job. Every worker may run the scheduler; one holds it.
            command = [
                sys.executable, "-m", "rq.cli", "worker", "--url", self.cfg.broker_url,
                "--worker-class", "rq.worker.SimpleWorker", "--with-scheduler",
                "--logging_level", "WARNING", "--name", f"burst-{ctx.run_id}-{i}", ctx.queue,
            ]  # fmt: skip
            self.workers.append(start_process(command, env, ctx.folder / f"worker-{i}.log"))
        seconds_until(self._ready, "the rq workers and scheduler becoming ready", 120, self.workers)

    def _ready(self) -> bool:
        from rq import Worker

        workers = Worker.all(queue=self._queue)
        return len(workers) >= self.cfg.workers and bool(
            self._redis.exists(f"rq:scheduler-lock:{self._queue.name}")
        )

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        """One pipeline per call: rq's own way to write many jobs in one round trip."""
        from benchmarks.harness.peer_apps import record_rq

        with self._redis.pipeline() as pipe:
            for job in jobs:
                planned = self._queue.create_job(
                    record_rq, args=(job.index, job.token), job_id=job.id, result_ttl=0
                )
                due = datetime.fromtimestamp(job.due_at, tz=timezone.utc)
                self._queue.schedule_job(planned, due, pipeline=pipe)
            pipe.execute()
        self._ids.extend(job.id for job in jobs)
        return len(jobs)

    def clean(self, ctx: RunContext) -> None:
        """rq's keys are global per job id: delete this run's jobs, then its queue's keys."""
        if not hasattr(self, "_redis"):
            return
        for first in range(0, len(self._ids), 1000):
            chunk = self._ids[first : first + 1000]
            self._redis.delete(*[f"rq:job:{i}" for i in chunk])
            self._redis.delete(*[f"rq:results:{i}" for i in chunk])
        for pattern in (f"rq:*{ctx.queue}*", f"rq:worker:burst-{ctx.run_id}-*"):
            for key in self._redis.scan_iter(match=pattern, count=1000):
                self._redis.delete(key)
        self._redis.srem("rq:queues", f"rq:queue:{ctx.queue}")


# -- huey ------------------------------------------------------------------------------------------


class Huey(System):
    name = "huey (RedisHuey)"
    release_note = "n/a: huey records no enqueue time"

    def start(self, ctx: RunContext) -> None:
        from benchmarks.harness.peer_apps import make_huey

        _need_redis("huey", self.cfg.broker_url)
        self._huey, self._task = make_huey(ctx.queue, self.cfg.broker_url)
        env = scenario_environment(ctx, self.cfg, BENCH_HUEY="1")
        # One consumer: its scheduler thread plus --workers worker processes.
        command = [
            sys.executable, "-m", "huey.bin.huey_consumer", "benchmarks.harness.peer_apps.huey",
            "--workers", str(self.cfg.workers), "--worker-type", "process", "--quiet",
        ]  # fmt: skip
        self.workers.append(start_process(command, env, ctx.folder / "consumer.log"))
        seconds_until(
            lambda: ready_count(ctx.folder) >= self.cfg.workers,
            "the huey workers becoming ready",
            120,
            self.workers,
        )

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        for job in jobs:
            due = datetime.fromtimestamp(job.due_at, tz=timezone.utc)
            self._task.schedule(args=(job.index, job.token), eta=due, id=job.id)
        return len(jobs)

    def clean(self, ctx: RunContext) -> None:
        if hasattr(self, "_huey"):
            self._huey.storage.flush_all()  # only this huey's own queue, schedule and result keys


SYSTEMS: dict[str, type[System]] = {
    "parallel-scheduler": ParallelScheduler,
    "celery-eta": CeleryEta,
    "rq": RqScheduler,
    "huey": Huey,
}
PEERS = ("celery-eta", "rq", "huey")


def parse_peers(value: str) -> list[str]:
    """``--peers``: ``all``, or a comma-separated list of known peers."""
    chosen = list(PEERS) if value == "all" else [p.strip() for p in value.split(",") if p.strip()]
    unknown = set(chosen) - set(PEERS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer(s) {sorted(unknown)}; known: {PEERS}")
    return chosen
