"""A real scheduler process for the fault tests, so SIGKILL, SIGSTOP and SIGTERM are real.

    python -m tests.faults.scheduler_process --storage-url URL --prefix P [--prefix P2 ...]
        --name NAME --record FILE --ready FILE [--clock-offset SECONDS] [settings...]

It runs one ``DelayedJobScheduler`` per prefix, all sending through one recording dispatcher:
each dispatched job becomes the line ``<job id> <real epoch time> <name>`` appended to ``--record``
with a single ``write`` on an ``O_APPEND`` descriptor, so a line is either whole or absent even
when the process is killed. ``--dispatch-delay`` makes each hand-off take that long, like a broker
round trip, so a fault can land in the middle of a batch.

``--broker-url redis://…`` sends through the fast publish path (``RedisPublisher``, one atomic
push per chunk) to that Redis broker instead, where the test counts the messages; with Redis
storage on the same server and ``--release-mode batch``, that is the one-script release.

``--clock-offset`` shifts this process's ``time.time`` (and ``time_ns``) before anything else is
imported: the process believes it is that many seconds ahead (or behind, if negative) of the real
clock, as a host with a skewed clock would. Recorded times are always the real clock's.

The lock owner is ``<name>:<pid>:<prefix>``. SIGTERM/SIGINT stop every scheduler gracefully.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

_real_time: Callable[[], float] = time.time
_real_time_ns: Callable[[], int] = time.time_ns


def shift_clock(offset: float) -> None:
    """Make ``time.time()`` answer ``offset`` seconds away from the real clock in this process."""
    offset_ns = int(offset * 1_000_000_000)
    time.time = lambda: _real_time() + offset
    time.time_ns = lambda: _real_time_ns() + offset_ns


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scheduler_process")
    parser.add_argument("--storage-url", required=True)
    parser.add_argument("--prefix", action="append", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--clock-offset", type=float, default=0.0)
    parser.add_argument("--dispatch-delay", type=float, default=0.0)
    parser.add_argument("--broker-url")
    parser.add_argument("--release-mode", default="per_job")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=0.1)
    parser.add_argument("--lock-lease", type=float, default=3.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    ns = parse(argv)
    if ns.clock_offset:
        shift_clock(ns.clock_offset)
    # Imported only now, so every module sees the shifted clock.
    import logging
    import signal
    import threading
    from types import FrameType
    from typing import Any

    import storage_adapters
    from parallel_scheduler import CallableDispatcher, DelayedJobScheduler, Dispatcher, Settings

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    fd = os.open(ns.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    delay = ns.dispatch_delay

    def record(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        if delay:
            time.sleep(delay)
        os.write(fd, f"{job_id} {_real_time():.6f} {ns.name}\n".encode())

    dispatcher: Dispatcher = CallableDispatcher(record)
    if ns.broker_url:
        from tests.faults.broker_messages import fast_publisher

        dispatcher = fast_publisher(ns.broker_url)
    settings = Settings(
        release_mode=ns.release_mode,
        batch_size=ns.batch_size,
        max_degree_of_parallelism=ns.parallelism,
        poll_interval=ns.poll_interval,
        lock_lease=ns.lock_lease,
    )
    schedulers = []
    for prefix in ns.prefix:
        storage = storage_adapters.from_url(ns.storage_url, prefix=prefix, pool_size=ns.parallelism)
        storage.setup()
        owner = f"{ns.name}:{os.getpid()}:{prefix}"
        schedulers.append(
            DelayedJobScheduler(storage, dispatcher, settings, owner=owner, owns_storage=True)
        )

    def stop(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("faults").info("signal %d: stopping gracefully", signum)
        for scheduler in schedulers:
            scheduler.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threads = [
        threading.Thread(
            target=s.run_forever, kwargs={"install_signal_handlers": False}, name=f"loop-{p}"
        )
        for s, p in zip(schedulers, ns.prefix, strict=True)
    ]
    for thread in threads:
        thread.start()
    with open(ns.ready + ".tmp", "w") as ready:
        json.dump({"pid": os.getpid(), "believed": time.time(), "real": _real_time()}, ready)
    os.replace(ns.ready + ".tmp", ns.ready)  # the test sees the whole file or none
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # short joins keep the main thread free to run signal handlers
    for scheduler in schedulers:
        scheduler.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
