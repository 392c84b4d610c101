"""Scale and soak: a due batch is as fast to fetch among 1,000,000 stored jobs as among 10,000,
and a scheduler process's memory stays flat over a long release run. Not a CI test.

    .venv/bin/python -m benchmarks.soak --throwaway              # its own PostgreSQL, 10 minutes
    .venv/bin/python -m benchmarks.soak --storage-url postgresql://app@db/jobs --minutes 30

1. Scale. 10,000 jobs are stored due (due times spread over the past hour), and
   ``fetch_due_ids(1000)`` is timed; then 990,000 more are stored due in the next 30 days (the
   backlog a busy system keeps) and it is timed again. PostgreSQL's plan for the due query is
   printed at both sizes (``EXPLAIN (ANALYZE, BUFFERS)``, after ``ANALYZE``, as autovacuum would
   leave the table).
2. Soak. A real scheduler process (``devtools.scheduler_process``: ``SchedulerService``, the
   delayed and recurring schedulers, with the project's default settings unless given) runs for
   ``--minutes`` while this process stores ``--rate`` due jobs per second on top of the
   1,000,000. Its RSS is sampled with psutil every ``--sample-every`` seconds and printed as a
   table with what it released meanwhile. The dispatcher only counts jobs: the figure is the
   scheduler's own memory, not a broker's.

``--throwaway`` starts a PostgreSQL of its own (from the installed binaries, on a free port, in a
temporary directory; the throwaway servers' launcher, ``devtools.servers``) instead of using
``--storage-url``, so a soak never loads a shared server. The prefix is dropped at the end unless
``--keep``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

import storage_adapters
from benchmarks.harness.due_fetch import FETCH, SMALL, at, explain_due_query, store, time_fetch
from benchmarks.harness.report import git_commit, load_average
from devtools.scheduler_process import SchedulerProcess
from storage_adapters import Storage


def scale(storage: Storage, is_postgresql: bool, large: int) -> None:
    now = storage.now()
    print(f"\n== scale: fetch_due_ids({FETCH}) with {SMALL:,} due jobs", flush=True)
    store(storage, 0, SMALL, lambda i: now - 3600 * (1 - i / SMALL))
    small = time_fetch(storage)
    plan_small = explain_due_query(storage) if is_postgresql else ""
    began = time.monotonic()
    store(storage, SMALL, large - SMALL, lambda i: now + 60 + 30 * 86400 * (i / large))
    print(f"stored {large - SMALL:,} more (future) jobs in {time.monotonic() - began:.0f} s")
    big = time_fetch(storage)
    plan_large = explain_due_query(storage) if is_postgresql else ""
    print(f"\n{'jobs stored':>12} | {'median':>9} | {'p95':>9} | {'min':>9}")
    for size, figures in ((SMALL, small), (large, big)):
        print(
            f"{size:>12,} | {figures['median_ms']:>6.2f} ms | {figures['p95_ms']:>6.2f} ms | "
            f"{figures['min_ms']:>6.2f} ms"
        )
    ratio = big["median_ms"] / small["median_ms"]
    print(f"median at {large:,} / at {SMALL:,}: {ratio:.2f}x")
    if is_postgresql:
        print(f"\nEXPLAIN of the due query at {SMALL:,} stored:\n{plan_small}")
        print(f"\nEXPLAIN of the due query at {large:,} stored:\n{plan_large}")


class Producer(threading.Thread):
    """Stores ``rate`` due jobs per second, in five slices a second, until stopped."""

    def __init__(self, storage: Storage, rate: int, first: int) -> None:
        super().__init__(name="producer", daemon=True)
        self.storage, self.rate, self.next_id = storage, rate, first
        self.produced = 0
        self.halt = threading.Event()

    def run(self) -> None:
        slice_size = max(1, self.rate // 5)
        began = time.monotonic()
        while not self.halt.is_set():
            store(self.storage, self.next_id, slice_size, at(self.storage.now()))
            self.next_id += slice_size
            self.produced += slice_size
            ahead = self.produced / self.rate - (time.monotonic() - began)
            if ahead > 0:
                self.halt.wait(ahead)


def soak(args: argparse.Namespace, url: str, prefix: str, storage: Storage) -> None:
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"soak-{prefix}"
    workdir.mkdir(parents=True, exist_ok=True)
    print(
        f"\n== soak: {args.minutes:g} min, {args.rate:,} due jobs/s stored on top of "
        f"{args.jobs:,}, release_mode={args.release_mode}, parallelism={args.parallelism}, "
        f"batch_size={args.batch_size}",
        flush=True,
    )
    # its status file says how many it released so far (a count: no id is kept in memory)
    child = SchedulerProcess(
        workdir, "scheduler", url, [prefix], service=True, record=False, status=True,
        release_mode=args.release_mode, parallelism=args.parallelism,
        batch_size=args.batch_size, log_level="WARNING",
    )  # fmt: skip
    producer = Producer(storage, args.rate, args.jobs)
    process = psutil.Process(child.pid)
    samples: list[tuple[float, float, int]] = []
    # backlog: due jobs not yet released (the scale run's 10,000 due jobs count from the start)
    print(f"{'elapsed':>8} | {'RSS MB':>7} | {'released':>10} | {'per s':>7} | {'backlog':>8}")
    began = time.monotonic()
    producer.start()
    try:
        while (elapsed := time.monotonic() - began) < args.minutes * 60:
            if not child.alive():
                raise SystemExit(f"the scheduler exited ({child.poll()}); see {workdir}")
            rss = process.memory_info().rss / 2**20
            released = int(child.status()["released"])
            rate = (released - samples[-1][2]) / (elapsed - samples[-1][0]) if samples else 0.0
            samples.append((elapsed, rss, released))
            print(
                f"{elapsed:>7.0f}s | {rss:>7.1f} | {released:>10,} | {rate:>7.0f} | "
                f"{SMALL + producer.produced - released:>8,}",
                flush=True,
            )
            time.sleep(args.sample_every)  # the sampling period
    finally:
        producer.halt.set()
        producer.join()
        status = child.stop(timeout=120)
    summarise(samples, status)


def summarise(samples: list[tuple[float, float, int]], status: int) -> None:
    # The first minute is warm-up (imports, pools, caches); flatness is judged after it.
    steady = [s for s in samples if s[0] >= 60] or samples
    first, last = steady[0], steady[-1]
    peak = max(s[1] for s in steady)
    times = [s[0] for s in steady]
    rss = [s[1] for s in steady]
    slope = statistics.linear_regression(times, rss).slope * 60 if len(steady) > 2 else 0.0
    print(
        f"\nRSS after warm-up: {first[1]:.1f} MB at {first[0]:.0f} s -> {last[1]:.1f} MB at "
        f"{last[0]:.0f} s (peak {peak:.1f} MB, trend {slope:+.2f} MB/min); released "
        f"{last[2]:,} jobs; scheduler exit status {status} after SIGTERM"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-url", default=os.environ.get(
        "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    ))  # fmt: skip
    parser.add_argument("--throwaway", action="store_true", help="start a PostgreSQL of its own")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs stored for the scale run")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-every", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--rate", type=int, default=500, help="due jobs stored per second")
    parser.add_argument("--release-mode", choices=("per_job", "batch"), default="per_job")
    parser.add_argument("--parallelism", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the jobs (do not drop)")
    args = parser.parse_args()
    server = None
    url = args.storage_url
    if args.throwaway:
        from devtools.servers import PostgresServer, new_workdir

        server = PostgresServer(new_workdir("soak", prefix="ps-bench"))
        server.start()
        url = server.url
    prefix = "soak" + uuid.uuid4().hex[:8]
    storage = storage_adapters.from_url(url, prefix=prefix, pool_size=4)
    started_load = load_average()
    try:
        storage.setup()
        print(f"storage {storage!r}; commit {git_commit()}; load average {started_load}")
        scale(storage, url.startswith("postgres"), args.jobs)
        soak(args, url, prefix, storage)
    finally:
        if not args.keep:
            storage.drop()
        storage.close()
        if server is not None:
            server.close()
        print(f"\nload average at the start {started_load}, at the end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
