"""The systems the burst benchmark drives: parallel-scheduler, and the peers it is compared with.

Each system gets the same planned jobs (ids, arguments, due times) and the same number of worker
processes, schedules them through its own public API in calls of many jobs, and releases them
its own way; every execution lands in the same Redis list (``burst_app.record``). A system says
which of its processes to measure, and whether it can tell when a job was handed to its queue
(``sent_times``): plain Celery cannot, since its "release" happens inside the worker.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
CELERY_TASK = "bench.burst.record"


@dataclass(frozen=True)
class PlannedJob:
    """One job of the workload: the same for every system in one repetition."""

    id: str
    index: int
    token: str
    due_at: float


@dataclass(frozen=True)
class BurstConfig:
    """The options every system reads (the CLI's, minus the reporting ones)."""

    storage_url: str
    broker_url: str
    results_url: str
    release_mode: str
    parallelism: int
    batch_size: int
    poll_interval: float
    dispatcher: str
    workers: int
    caller_pool: int
    pool: str = "prefork"
    accept_time_messages: bool = False


@dataclass
class RunContext:
    """Names of everything one repetition creates, so it can all be removed afterwards."""

    run_id: str
    folder: Path
    queue: str = field(init=False)
    prefix: str = field(init=False)
    results_key: str = field(init=False)

    def __post_init__(self) -> None:
        self.queue = f"ps-bench-burst-{self.run_id}"
        self.prefix = f"psbenchburst{self.run_id}"
        self.results_key = f"ps-bench-burst:{self.run_id}:executed"


def is_redis(url: str) -> bool:
    return url.split("://", 1)[0] in ("redis", "rediss", "unix")


# -- processes we start ----------------------------------------------------------------------------


def worker_environment(ctx: RunContext, cfg: BurstConfig, **extra: str) -> dict[str, str]:
    """The benchmark's settings for a worker, minus PARALLEL_SCHEDULER_* variables that would
    otherwise override them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARALLEL_SCHEDULER_")}
    env.update(
        BURST_BROKER_URL=cfg.broker_url,
        BURST_RESULTS_URL=cfg.results_url,
        BURST_RESULTS_KEY=ctx.results_key,
        BURST_QUEUE=ctx.queue,
        BURST_READY_DIR=str(ctx.folder),
        PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    env.update(extra)
    return env


def start_process(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Warm shutdown by our own pid (SIGTERM), then SIGKILL if it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def wait_until(condition: Any, what: str, timeout: float, processes: Sequence[Any] = ()) -> None:
    """Poll ``condition`` until it holds; fail early when one of our processes died."""
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{what}: a process we started exited ({process.args})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def ready_count(folder: Path) -> int:
    return len(list(folder.glob("ready-*")))


# -- the broker queue ------------------------------------------------------------------------------


def delete_celery_queue(broker_url: str, queue: str) -> None:
    """Remove a Celery queue with its bindings and any of its messages kombu parked as unacked."""
    if is_redis(broker_url):
        client = redis.Redis.from_url(broker_url)
        client.delete(
            queue,
            *[f"{queue}\x06\x16{step}" for step in range(10)],
            f"_kombu.binding.{queue}",
            f"_kombu.binding_permanent.{queue}",
        )
        _drop_unacked(client, queue)
        return
    from kombu.connection import Connection

    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        channel = connection.default_channel
        channel.queue_delete(queue)
        channel.exchange_delete(queue)  # Celery's default exchange is named after the queue


def _drop_unacked(client: redis.Redis, queue: str) -> None:
    """kombu's Redis transport keeps unacknowledged messages of all queues in one shared hash;
    only this queue's entries are removed."""
    for tag, raw in client.hscan_iter("unacked"):
        with contextlib.suppress(ValueError, TypeError, IndexError):
            _, exchange, routing_key = json.loads(raw)
            if queue in (exchange, routing_key):
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)


# -- the interface ---------------------------------------------------------------------------------


class System(ABC):
    """One system under test, for one repetition at a time."""

    name: str
    #: what ``sent_times`` means for this system, or why it has none
    release_note: str = ""

    def __init__(self, cfg: BurstConfig) -> None:
        self.cfg = cfg
        self.workers: list[subprocess.Popen[bytes]] = []

    @abstractmethod
    def start(self, ctx: RunContext) -> None:
        """Create storage, start workers (and a scheduler), wait until all are ready."""

    @abstractmethod
    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        """One caller's call: schedule ``jobs`` through the public API; returns how many were
        accepted as new."""

    def now(self) -> float:
        """The clock due times are set on."""
        return time.time()

    def sent_times(self) -> list[tuple[str, float]] | None:
        """(job id, time it was handed to the queue) per hand-off, or ``None`` if unknowable."""
        return None

    def scheduler_pids(self) -> list[int]:
        """Processes that release jobs, when they are not the workers themselves."""
        return []

    def worker_pids(self) -> list[int]:
        return [p.pid for p in self.workers]

    def storage_url(self) -> str | None:
        """The server whose CPU counts as this system's storage (if it is not the broker)."""
        return None

    def stop(self) -> None:
        """Stop the scheduler and the workers (warm shutdown), keeping what they reported."""
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            stop_process(worker)

    @abstractmethod
    def clean(self, ctx: RunContext) -> None:
        """Remove everything the repetition created (storage prefix, queues, keys)."""

    def _start_celery_workers(self, ctx: RunContext) -> None:
        """``--workers`` executing processes: by default ONE ``celery worker`` whose prefork pool
        has that many children (the usual deployment; its parent process consumes and holds ETA
        messages); with ``--pool solo``, that many single-process workers. With the solo pool,
        where ETA timers and task bodies share one thread, plain Celery's countdown path ran at
        ~35 jobs/s on this project's machine: not a fair default for that peer."""
        env = worker_environment(ctx, self.cfg)
        solo = self.cfg.pool == "solo"
        for i in range(self.cfg.workers if solo else 1):
            pool = (
                ["--pool=solo"] if solo else ["--pool=prefork", f"--concurrency={self.cfg.workers}"]
            )
            command = [
                sys.executable, "-m", "celery", "-A", "burst_app", "worker", *pool,
                "-Q", ctx.queue, "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel=WARNING", f"--hostname=burst-{ctx.run_id}-{i}@%h",
            ]  # fmt: skip
            self.workers.append(start_process(command, env, ctx.folder / f"worker-{i}.log"))
        wait_until(
            lambda: ready_count(ctx.folder) >= len(self.workers),
            "the Celery workers becoming ready",
            120,
            self.workers,
        )


# -- parallel-scheduler ----------------------------------------------------------------------------


def _dispatcher(kind: str, app: Any) -> Any:
    """``send_task``: Celery's publish per job (``CeleryDispatcher``); ``fast_publish``: a chunk
    per round trip to a Redis broker (``RedisPublisher``, what ``fast_publish=True`` selects)."""
    if kind == "send_task":
        from parallel_scheduler import CeleryDispatcher

        return CeleryDispatcher(app)
    from parallel_scheduler.celery.redis_publisher import RedisPublisher

    return RedisPublisher(app)


class _ReleaseLog:
    """The release listener: every hand-off with its send time on the storage clock."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, float]] = []
        self._guard = threading.Lock()

    def on_released(self, job: Any, sent_at: float) -> None:
        with self._guard:
            self.sent.append((job.id, sent_at))


def run_scheduler(
    settings: dict[str, Any],
    cfg: BurstConfig,
    queue: str,
    out_path: str,
    ready: EventType,
    stop: EventType,
    released: Synchronized[int],
) -> None:
    """The scheduler process: a ``DelayedJobScheduler`` on its own, so its CPU and memory are
    measured apart from the callers'; writes every hand-off to ``out_path`` when stopped."""
    from burst_app import build_celery_app

    import storage_adapters
    from parallel_scheduler import DelayedJobScheduler, Settings

    chosen = Settings(**settings)
    storage = storage_adapters.from_url(
        chosen.storage_url, prefix=chosen.prefix, pool_size=chosen.max_degree_of_parallelism
    )
    log = _ReleaseLog()
    dispatcher = _dispatcher(cfg.dispatcher, build_celery_app(cfg.broker_url, queue))
    scheduler = DelayedJobScheduler(
        storage, dispatcher, chosen, listeners=[log.on_released], owns_storage=True
    )
    runner = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}, daemon=True
    )
    runner.start()
    ready.set()
    while not stop.wait(0.05):
        released.value = len(log.sent)
    scheduler.stop()
    runner.join()
    scheduler.close()
    released.value = len(log.sent)
    Path(out_path).write_text(json.dumps(log.sent))


class ParallelScheduler(System):
    name = "parallel-scheduler"
    release_note = "release listener (storage clock)"

    def __init__(self, cfg: BurstConfig) -> None:
        super().__init__(cfg)
        self._client: Any = None
        self._scheduler: Any = None
        self._stop: EventType | None = None
        self._released: Synchronized[int] | None = None
        self._sent_path: Path | None = None

    def _settings(self, ctx: RunContext) -> dict[str, Any]:
        return {
            "storage_url": self.cfg.storage_url,
            "prefix": ctx.prefix,
            "max_degree_of_parallelism": self.cfg.parallelism,
            "batch_size": self.cfg.batch_size,
            "release_mode": self.cfg.release_mode,
            "poll_interval": self.cfg.poll_interval,
        }

    def start(self, ctx: RunContext) -> None:
        import storage_adapters
        from parallel_scheduler import Client, Settings

        self._queue = ctx.queue
        settings = Settings(**self._settings(ctx))
        storage = storage_adapters.from_url(
            self.cfg.storage_url, prefix=ctx.prefix, pool_size=self.cfg.caller_pool
        )
        # the callers build each broker message as they store the job, as the plugin does
        envelopes = None
        if self.cfg.accept_time_messages:
            from burst_app import build_celery_app

            envelopes = _dispatcher(
                self.cfg.dispatcher, build_celery_app(self.cfg.broker_url, ctx.queue)
            )
        self._client = Client(storage=storage, settings=settings, envelopes=envelopes)
        self._client.setup()
        self._start_celery_workers(ctx)
        self._start_scheduler(ctx)

    def _start_scheduler(self, ctx: RunContext) -> None:
        spawn = multiprocessing.get_context("spawn")
        ready, self._stop = spawn.Event(), spawn.Event()
        self._released = spawn.Value("i", 0)
        self._sent_path = ctx.folder / "sent.json"
        self._scheduler = spawn.Process(
            target=run_scheduler,
            args=(
                self._settings(ctx),
                self.cfg,
                ctx.queue,
                str(self._sent_path),
                ready,
                self._stop,
                self._released,
            ),
            name="burst-scheduler",
        )
        self._scheduler.start()
        wait_until(lambda: ready.is_set() or not self._scheduler.is_alive(), "scheduler", 60)
        if not self._scheduler.is_alive():
            raise RuntimeError("the scheduler process exited at start-up")

    def now(self) -> float:
        return float(self._client.storage.now())

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        from parallel_scheduler import JobSpec

        specs = [
            JobSpec(
                CELERY_TASK,
                [job.index, job.token],
                id=job.id,
                eta=job.due_at,
                options={"queue": self._queue},
            )
            for job in jobs
        ]
        return sum(result.created for result in self._client.schedule_many(specs))

    def released_count(self) -> int:
        return 0 if self._released is None else int(self._released.value)

    def scheduler_pids(self) -> list[int]:
        return [] if self._scheduler is None else [self._scheduler.pid]

    def storage_url(self) -> str | None:
        return self.cfg.storage_url

    def stop(self) -> None:
        if self._scheduler is not None and self._stop is not None:
            self._stop.set()
            self._scheduler.join(timeout=120)
            if self._scheduler.is_alive():
                self._scheduler.kill()
                self._scheduler.join()
        super().stop()

    def sent_times(self) -> list[tuple[str, float]] | None:
        if self._sent_path is None or not self._sent_path.exists():
            return []
        return [(str(i), float(t)) for i, t in json.loads(self._sent_path.read_text())]

    def storage_counts(self) -> dict[str, int]:
        return dict(self._client.counts())

    def clean(self, ctx: RunContext) -> None:
        if self._client is not None:
            self._client.storage.drop()
            self._client.storage.close()
        delete_celery_queue(self.cfg.broker_url, ctx.queue)


# -- plain Celery: send_task with a countdown ------------------------------------------------------


class CeleryEta(System):
    name = "Celery countdown (ETA)"
    release_note = "n/a: the worker holds every ETA message and releases it itself"

    def start(self, ctx: RunContext) -> None:
        from burst_app import build_celery_app

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

        if not is_redis(self.cfg.broker_url):
            raise SystemExit("burst: rq needs a Redis broker URL")
        self._redis = redis.Redis.from_url(self.cfg.broker_url)
        self._queue = Queue(ctx.queue, connection=self._redis)
        self._ids: list[str] = []
        env = worker_environment(ctx, self.cfg)
        for i in range(self.cfg.workers):
            # SimpleWorker runs jobs in the worker process itself, as Celery's solo pool does;
            # rq's default forks once per job. Every worker may run the scheduler; one holds it.
            command = [
                sys.executable, "-m", "rq.cli", "worker", "--url", self.cfg.broker_url,
                "--worker-class", "rq.worker.SimpleWorker", "--with-scheduler",
                "--logging_level", "WARNING", "--name", f"burst-{ctx.run_id}-{i}", ctx.queue,
            ]  # fmt: skip
            self.workers.append(start_process(command, env, ctx.folder / f"worker-{i}.log"))
        wait_until(self._ready, "the rq workers and scheduler becoming ready", 120, self.workers)

    def _ready(self) -> bool:
        from rq import Worker

        workers = Worker.all(queue=self._queue)
        return len(workers) >= self.cfg.workers and bool(
            self._redis.exists(f"rq:scheduler-lock:{self._queue.name}")
        )

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        """One pipeline per call: rq's own way to write many jobs in one round trip."""
        from burst_app import record_rq

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
        from burst_app import make_huey

        if not is_redis(self.cfg.broker_url):
            raise SystemExit("burst: huey needs a Redis broker URL")
        self._huey, self._task = make_huey(ctx.queue, self.cfg.broker_url)
        env = worker_environment(ctx, self.cfg, BURST_HUEY="1")
        # One consumer: its scheduler thread plus --workers worker processes.
        command = [
            sys.executable, "-m", "huey.bin.huey_consumer", "burst_app.huey",
            "--workers", str(self.cfg.workers), "--worker-type", "process", "--quiet",
        ]  # fmt: skip
        self.workers.append(start_process(command, env, ctx.folder / "consumer.log"))
        wait_until(
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
