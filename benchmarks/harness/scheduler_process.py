"""The burst benchmark's scheduler process: a ``DelayedJobScheduler`` on its own (a
``multiprocessing`` spawn target), so its CPU and memory are measured apart from the callers';
every hand-off is recorded by a release listener on the storage clock."""

from __future__ import annotations

import json
import threading
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from benchmarks.harness.celery_apps import build_celery_app

__all__ = ["dispatcher_for", "run_scheduler"]


def dispatcher_for(kind: str, app: Any) -> Any:
    """``send_task``: Celery's publish per job (``CeleryDispatcher``); ``fast_publish``: a chunk
    per round trip to a Redis broker (``RedisPublisher``, what ``fast_publish=True`` selects)."""
    if kind == "send_task":
        from parallel_scheduler import CeleryDispatcher

        return CeleryDispatcher(app)
    from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

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
    cfg: Any,
    queue: str,
    out_path: str,
    ready: EventType,
    stop: EventType,
    released: Synchronized[int],
) -> None:
    """The scheduler process: a ``DelayedJobScheduler`` on its own, so its CPU and memory are
    measured apart from the callers'; writes every hand-off to ``out_path`` when stopped."""
    import storage_adapters
    from parallel_scheduler import DelayedJobScheduler, Settings

    chosen = Settings(**settings)
    storage = storage_adapters.from_url(
        chosen.storage_url, prefix=chosen.prefix, pool_size=chosen.max_degree_of_parallelism
    )
    log = _ReleaseLog()
    dispatcher = dispatcher_for(cfg.dispatcher, build_celery_app(cfg.broker_url, queue))
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
