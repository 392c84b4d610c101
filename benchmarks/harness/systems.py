"""The systems the burst benchmark drives: parallel-scheduler here, the peers in ``peers.py``.

Each system gets the same planned jobs (ids, arguments, due times) and the same number of worker
processes, schedules them through its own public API in calls of many jobs, and releases them
its own way; every execution lands in the same Redis list (``celery_apps.record``). A system says
which of its processes to measure, and whether it can tell when a job was handed to its queue
(``sent_times``): plain Celery cannot, since its "release" happens inside the worker.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from benchmarks.harness.brokers import delete_celery_queue
from benchmarks.harness.celery_apps import CELERY_TASK, build_celery_app, ready_count
from benchmarks.harness.scheduler_process import dispatcher_for, run_scheduler
from benchmarks.harness.workloads import PlannedJob
from devtools.processes import clean_environment, start_process, stop_process
from devtools.waiting import seconds_until
from parallel_scheduler import Settings

DEFAULTS = Settings()


@dataclass(frozen=True)
class BurstConfig:
    """The options every system reads (the CLI's, minus the reporting ones); the scheduler's
    settings default to the product's own."""

    storage_url: str
    broker_url: str
    results_url: str
    release_mode: str = DEFAULTS.release_mode
    parallelism: int = DEFAULTS.max_degree_of_parallelism
    batch_size: int = DEFAULTS.batch_size
    poll_interval: float = DEFAULTS.poll_interval
    dispatcher: str = "send_task"
    workers: int = 1
    caller_pool: int = 10
    pool: str = "prefork"
    accept_time_messages: bool = False

    @classmethod
    def from_options(cls, ns: argparse.Namespace, **values: Any) -> BurstConfig:
        """The command's options of the same names, then ``values``."""
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in vars(ns).items() if k in names}, **values})


@dataclass
class RunContext:
    """Names of everything one repetition creates, so it can all be removed afterwards; ``name``
    is the scenario's (``burst``, ``steady``, ``m1m``)."""

    run_id: str
    folder: Path
    name: str = "burst"
    queue: str = field(init=False)
    prefix: str = field(init=False)
    results_key: str = field(init=False)

    def __post_init__(self) -> None:
        self.queue = f"ps-bench-{self.name}-{self.run_id}"
        self.prefix = f"psbench{self.name}{self.run_id}"
        self.results_key = f"ps-bench-{self.name}:{self.run_id}:executed"


def scenario_environment(ctx: RunContext, cfg: BurstConfig, **extra: str) -> dict[str, str]:
    """A worker's environment: the benchmark's settings in ``BENCH_*`` (``celery_apps``)."""
    return clean_environment(
        BENCH_BROKER_URL=cfg.broker_url,
        BENCH_RESULTS_URL=cfg.results_url,
        BENCH_RESULTS_KEY=ctx.results_key,
        BENCH_QUEUE=ctx.queue,
        BENCH_READY_DIR=str(ctx.folder),
        **extra,
    )


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
        env = scenario_environment(ctx, self.cfg)
        solo = self.cfg.pool == "solo"
        for i in range(self.cfg.workers if solo else 1):
            pool = (
                ["--pool=solo"] if solo else ["--pool=prefork", f"--concurrency={self.cfg.workers}"]
            )
            command = [
                sys.executable, "-m", "celery", "-A", "benchmarks.harness.celery_apps", "worker",
                *pool, "-Q", ctx.queue, "--without-gossip", "--without-mingle",
                "--without-heartbeat", "--loglevel=WARNING",
                f"--hostname=burst-{ctx.run_id}-{i}@%h",
            ]  # fmt: skip
            self.workers.append(start_process(command, env, ctx.folder / f"worker-{i}.log"))
        seconds_until(
            lambda: ready_count(ctx.folder) >= len(self.workers),
            "the Celery workers becoming ready",
            120,
            self.workers,
        )


# -- parallel-scheduler ----------------------------------------------------------------------------


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
            envelopes = dispatcher_for(
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
        seconds_until(lambda: ready.is_set() or not self._scheduler.is_alive(), "scheduler", 60)
        if not self._scheduler.is_alive():
            raise RuntimeError("the scheduler process exited at start-up")

    def now(self) -> float:
        return float(self._client.storage.now())

    def schedule(self, jobs: Sequence[PlannedJob]) -> int:
        from parallel_scheduler import JobSpec

        specs = [
            JobSpec(
                CELERY_TASK,
                args=[job.index, job.token],
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
