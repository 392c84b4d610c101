"""A real ``SchedulerService`` process over a sharded store, for the scale-out fault test.

    python -m tests.faults.service_process --storage-url URL --prefix P --shards S
        --name NAME --record FILE --ready FILE [settings...]

It runs the product's ``SchedulerService`` (one delayed and one recurring scheduler per shard,
each looping only while this process serves the shard) over the store ``URL``/``P`` split into
``S`` shards, opened the way settings open it (``opening_storage.open_storage``). Every job it
dispatches, delayed jobs and recurring firings alike, becomes the line
``<job id> <real epoch time> <name>`` appended to ``--record`` with a single ``write`` on an
``O_APPEND`` descriptor (as ``scheduler_process.py`` records), so a line is whole or absent even
when the process is SIGKILLed. ``--dispatch-delay`` makes each hand-off take that long, so a
pass holds its lock long enough for a test to act during it.

Its instance id, which is also its lock owner, is ``<name>:<pid>``, so the test can tell whose
heartbeat record and whose lock it is reading. The ready file is written once ``start()`` has
returned (the heartbeat has registered the process). SIGTERM/SIGINT stop it gracefully.

``--start-file PATH``: import, open and set up everything, then start the service only once
``PATH`` exists, so a test can make a process join at a chosen moment without waiting out a
Python start-up (seconds on a busy machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="service_process")
    parser.add_argument("--storage-url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--start-file")
    parser.add_argument("--release-mode", default="batch")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=0.05)
    parser.add_argument("--lock-lease", type=float, default=2.0)
    parser.add_argument("--heartbeat-interval", type=float, default=0.25)
    parser.add_argument("--dispatch-delay", type=float, default=0.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    ns = parse(argv)
    import logging
    import signal
    import threading
    from types import FrameType
    from typing import Any

    from parallel_scheduler import CallableDispatcher, Settings
    from parallel_scheduler.opening_storage import open_storage
    from parallel_scheduler.process.service import SchedulerService

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    fd = os.open(ns.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        if ns.dispatch_delay:
            time.sleep(ns.dispatch_delay)
        os.write(fd, f"{job_id} {time.time():.6f} {ns.name}\n".encode())

    settings = Settings(
        storage_url=ns.storage_url,
        prefix=ns.prefix,
        shards=ns.shards,
        release_mode=ns.release_mode,
        batch_size=ns.batch_size,
        max_degree_of_parallelism=ns.parallelism,
        poll_interval=ns.poll_interval,
        lock_lease=ns.lock_lease,
        heartbeat_interval=ns.heartbeat_interval,
        retention=None,  # nothing here is old enough to purge; spare the purge passes
    )
    storage = open_storage(settings)
    storage.setup()
    service = SchedulerService.build(
        storage,
        CallableDispatcher(record),
        settings,
        owner=f"{ns.name}:{os.getpid()}",
        owns_storage=True,
    )
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("faults").info("signal %d: stopping gracefully", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ns.start_file:  # loaded and connected; join the others only when the test says so
        while not os.path.exists(ns.start_file) and not stopping.wait(0.01):
            pass
    service.start()
    with open(ns.ready + ".tmp", "w") as ready:
        json.dump({"pid": os.getpid(), "owner": service.owner}, ready)
    os.replace(ns.ready + ".tmp", ns.ready)  # the test sees the whole file or none
    while not stopping.wait(0.2):  # short waits keep the main thread free for signal handlers
        pass
    service.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
