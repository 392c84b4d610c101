"""One scheduler process of the scale-out benchmark: the product's ``SchedulerService`` over a
store split into shards, handing every job to a counting dispatcher.

    python -m harness.scale_out_process --storage-url URL --prefix P --shards S --go FILE
        --ids FILE --status FILE [--batch-size N --parallelism N ...]

The dispatcher is the cheapest one that still lets the harness check the run: it appends the job
id to an in-memory list and notes the wall-clock time of the latest hand-off (no broker, no
syscall per job), so what is measured is the scheduler and its storage, not a broker. It loads,
connects and sets everything up first, then starts the service only once ``--go`` exists, so
the processes of a run start together and the harness reads their CPU time just before. Five times
a second it replaces ``--status`` with ``{"released": n, "last_at": t}``; on SIGTERM it stops the
service gracefully, writes every id it dispatched to ``--ids`` (one per line) and a final status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scale_out_process")
    parser.add_argument("--storage-url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--go", required=True)
    parser.add_argument("--ids", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--name", default="scheduler")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--parallelism", type=int)
    parser.add_argument("--release-mode")
    parser.add_argument("--heartbeat-interval", type=float)
    parser.add_argument("--poll-interval", type=float)
    parser.add_argument("--lock-lease", type=float)
    return parser.parse_args(argv)


class Counting:
    """The dispatcher: every id kept in memory, and the time of the latest hand-off."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.last_at = 0.0

    def __call__(self, task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        self.ids.append(job_id)  # list.append is atomic under the GIL: no lock needed
        self.last_at = time.time()


def _write_status(path: str, counting: Counting) -> None:
    with open(path + ".tmp", "w") as out:
        json.dump({"released": len(counting.ids), "last_at": counting.last_at}, out)
    os.replace(path + ".tmp", path)


def main(argv: list[str]) -> int:
    ns = parse(argv)
    import logging
    import signal
    from types import FrameType

    from parallel_scheduler import CallableDispatcher, Settings
    from parallel_scheduler.opening_storage import open_storage
    from parallel_scheduler.process.service import SchedulerService

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    chosen = {
        "batch_size": ns.batch_size,
        "max_degree_of_parallelism": ns.parallelism,
        "release_mode": ns.release_mode,
        "heartbeat_interval": ns.heartbeat_interval,
        "poll_interval": ns.poll_interval,
        "lock_lease": ns.lock_lease,
    }
    settings = Settings(
        storage_url=ns.storage_url,
        prefix=ns.prefix,
        shards=ns.shards,
        retention=None,
        **{key: value for key, value in chosen.items() if value is not None},
    )
    storage = open_storage(settings)
    storage.setup()
    counting = Counting()
    service = SchedulerService.build(
        storage,
        CallableDispatcher(counting),
        settings,
        owner=f"{ns.name}:{os.getpid()}",
        owns_storage=True,
    )
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _write_status(ns.status, counting)  # loaded and connected: the harness may start the run
    while not os.path.exists(ns.go) and not stopping.wait(0.005):
        pass
    service.start()
    while not stopping.wait(0.2):
        _write_status(ns.status, counting)
    service.close()
    with open(ns.ids, "w") as out:
        out.write("".join(f"{job_id}\n" for job_id in counting.ids))
    _write_status(ns.status, counting)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
