"""A scheduler process for the benchmarks: the product's ``SchedulerService``, built the way
``parallel-scheduler run --app`` and ``celery parallel-scheduler`` build it (the Celery
integration's ``make_service``: settings, dispatcher choice, ``fast_publish``), run in a spawned
process of its own so its CPU and memory are measured apart from the harness.

Besides running, it records:

* every release, from the plugin's public ``job_released`` signal: the job id and ``sent_at``, the
  storage-clock time taken after the broker accepted the message and the job was marked Enqueued
  (so an upper bound on when the message reached the broker);
* every delayed-scheduler pass: wall-clock start, duration, whether it held the lock, how many
  jobs it fetched and released, and whether it was idle (nothing due: one peek, no lock), by
  wrapping the instance's ``run_once``, which the real ``run_forever`` loop calls; nothing else
  of the service is touched.

Both are written to a JSON file when the process is stopped; the counts of releases and of
passes that ran (held the lock, or were idle) are shared live, so a harness can wait for them.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from benchmarks.harness.celery_apps import build_celery_app
from devtools.waiting import seconds_until

__all__ = ["ServiceConfig", "ServiceLog", "ServiceProcess", "run_service"]


@dataclass(frozen=True)
class ServiceConfig:
    """What the scheduler process needs: where jobs are, where they go, and its settings.

    ``settings`` are passed to ``parallel_scheduler.celery.install(app, **settings)``, where they
    beat both ``PARALLEL_SCHEDULER_*`` environment variables and ``app.conf``: a figure is never
    silently produced with an operator's override.
    """

    storage_url: str
    prefix: str
    broker_url: str
    queue: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServiceLog:
    """What the process recorded: (job id, sent_at) per release; per pass (started at, seconds,
    lock held, fetched, released, idle: nothing was due, one peek and no lock); the effective
    settings."""

    sent: list[tuple[str, float]]
    passes: list[tuple[float, float, bool, int, int, bool]]
    settings: dict[str, Any]


def run_service(
    config: ServiceConfig,
    out_path: str,
    ready: EventType,
    stop: EventType,
    released: Synchronized[int],
    passes: Synchronized[int],
) -> None:
    """The scheduler process's body (a ``multiprocessing`` spawn target)."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    import parallel_scheduler.celery as plugin
    from parallel_scheduler.celery import job_released

    app = build_celery_app(config.broker_url, config.queue)
    integration = plugin.install(
        app, storage_url=config.storage_url, prefix=config.prefix, **config.settings
    )
    sent: list[tuple[str, float]] = []  # list.append is atomic: the pool threads share it

    def on_released(sender: Any = None, **kwargs: Any) -> None:
        sent.append((str(kwargs["job_id"]), float(kwargs["sent_at"])))

    job_released.connect(on_released, weak=False)
    service = integration.make_service()
    log: list[tuple[float, float, bool, int, int, bool]] = []
    pass_once = service.delayed.run_once

    def counted_pass() -> Any:
        began = time.time()
        stats = pass_once()
        log.append(
            (began, stats.duration, stats.lock_acquired, stats.fetched, stats.released, stats.idle)
        )
        # A pass that ran: it held the lock, or found nothing due (idle: no lock needed). Not one
        # that lost the lock to another scheduler.
        if stats.lock_acquired or stats.idle:
            passes.value += 1  # only the delayed scheduler's thread writes it
        return stats

    service.delayed.run_once = counted_pass  # type: ignore[method-assign]
    service.start()
    ready.set()
    while not stop.wait(0.05):
        released.value = len(sent)
    service.close()  # in-flight work finishes and both locks are released first
    released.value = len(sent)
    document = {"sent": sent, "passes": log, "settings": service.settings.describe()}
    Path(out_path).write_text(json.dumps(document))


class ServiceProcess:
    """Start, watch and stop one ``run_service`` process; ``stop()`` returns its log."""

    def __init__(self, config: ServiceConfig, folder: Path) -> None:
        spawn = multiprocessing.get_context("spawn")
        self._ready, self._stop = spawn.Event(), spawn.Event()
        self._released = spawn.Value("i", 0)
        self._passes = spawn.Value("i", 0)
        self._out = folder / f"service-{config.prefix}.json"
        self._process = spawn.Process(
            target=run_service,
            args=(config, str(self._out), self._ready, self._stop, self._released, self._passes),
            name="bench-scheduler",
        )
        self._log: ServiceLog | None = None

    def start(self, timeout: float = 120.0) -> None:
        self._process.start()
        seconds_until(
            lambda: self._ready.is_set() or not self._process.is_alive(),
            "the scheduler process starting",
            timeout,
        )
        if not self._process.is_alive():
            raise RuntimeError("the scheduler process exited at start-up")

    @property
    def pid(self) -> int:
        assert self._process.pid is not None, "not started"
        return self._process.pid

    @property
    def released(self) -> int:
        return int(self._released.value)

    @property
    def passes(self) -> int:
        """Passes that held the lock so far."""
        return int(self._passes.value)

    def alive(self) -> bool:
        return self._process.is_alive()

    def wait_passes(self, count: int, timeout: float) -> None:
        """Until ``count`` more passes ran, holding the lock or idle (fails if the process dies)."""
        target = self.passes + count
        seconds_until(
            lambda: self.passes >= target, f"{count} scheduler passes", timeout, [self._process]
        )

    def stop(self, timeout: float = 120.0) -> ServiceLog:
        """Graceful stop (the service finishes in-flight work), SIGKILL by pid after
        ``timeout``; idempotent."""
        if self._log is not None:
            return self._log
        self._stop.set()
        self._process.join(timeout=timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        if not self._out.exists():
            raise RuntimeError("the scheduler process left no log (it did not stop cleanly)")
        raw = json.loads(self._out.read_text())
        self._log = ServiceLog(
            sent=[(str(i), float(t)) for i, t in raw["sent"]],
            passes=[
                (float(a), float(b), bool(c), int(d), int(e), bool(f))
                for a, b, c, d, e, f in raw["passes"]
            ],
            settings=dict(raw["settings"]),
        )
        return self._log

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.pid is not None and self._log is None:
            with contextlib.suppress(RuntimeError):
                self.stop()
