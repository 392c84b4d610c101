"""Accept rate: jobs stored per second through the public ``Client``, bulk and one call per job.

    .venv/bin/python benchmarks/accept_rate.py \\
        --storage-url postgresql+psycopg://postgres@127.0.0.1:5432/test --out accept.json

Two shapes, each on a fresh storage prefix, 1 warm-up then the median of 3 repetitions:

- bulk: ``--callers`` threads each storing ``--call-size`` jobs per ``schedule_many`` call;
- single: ``--callers`` threads each storing one job per call, as ``schedule()`` does (one
  durable write, one round trip per call), with per-call latency.

Checked before a figure is kept: storage holds exactly the jobs the run stored, each id once,
all Scheduled. Ids and arguments come from ``--seed``; the JSON output refuses to overwrite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.report import refuse_existing, write_once

import storage_adapters
from parallel_scheduler import Client, JobSpec, JobState, Settings


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def one_run(args: argparse.Namespace, shape: str, jobs: int, seed: int) -> dict[str, float]:
    prefix = "benchaccept" + uuid.uuid4().hex[:8]
    storage = storage_adapters.from_url(
        args.storage_url, prefix=prefix, pool_size=max(args.callers, 1)
    )
    storage.setup()
    client = Client(storage=storage, settings=Settings(storage_url=args.storage_url))
    rng = random.Random(seed)
    specs = [
        JobSpec(
            "bench.noop",
            args=[i, rng.random()],
            kwargs={"k": "v" * 8},
            options={"queue": "q"},
            id=f"j{i}",
            countdown=3600,
        )
        for i in range(jobs)
    ]
    shares = [specs[c :: args.callers] for c in range(args.callers)]
    latencies: list[float] = []
    guard = threading.Lock()

    def bulk(share: list[JobSpec]) -> None:
        for first in range(0, len(share), args.call_size):
            client.schedule_many(share[first : first + args.call_size])

    def single(share: list[JobSpec]) -> None:
        mine = []
        for spec in share:
            started = time.perf_counter()
            client.schedule_many([spec])
            mine.append(time.perf_counter() - started)
        with guard:
            latencies.extend(mine)

    work: Callable[[list[JobSpec]], None] = bulk if shape == "bulk" else single
    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    try:
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        counts = storage.count_by_state()  # the oracle, before the figure is kept
        if counts[JobState.SCHEDULED] != jobs or sum(counts.values()) != jobs:
            sys.exit(f"{shape}: storage holds {dict(counts)}, expected {jobs} scheduled")
        result = {"jobs_per_s": jobs / elapsed}
        if latencies:
            result |= {f"p{q}_ms": _percentile(latencies, q) * 1000 for q in (50, 90, 99)}
        return result
    finally:
        storage.drop()
        client.close()
        storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--bulk-jobs", type=int, default=50_000)
    parser.add_argument("--single-jobs", type=int, default=10_000)
    parser.add_argument("--callers", type=int, default=8, help="concurrent threads")
    parser.add_argument("--call-size", type=int, default=1000, help="jobs per bulk call")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shapes", nargs="*", choices=("bulk", "single"), default=["bulk", "single"]
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    refuse_existing(parser, args.out)
    if min(args.bulk_jobs, args.single_jobs, args.callers, args.call_size, args.repetitions) < 1:
        parser.error("job counts, --callers, --call-size and --repetitions must be >= 1")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}}
    scheme = args.storage_url.split(":")[0]
    print(f"| shape (storage {scheme}, {args.callers} callers) | jobs | median jobs/s | min | max "
          "| call latency p50 / p90 / p99, ms |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|")
    for shape in args.shapes:
        jobs = args.bulk_jobs if shape == "bulk" else args.single_jobs
        one_run(args, shape, min(jobs, 2000), 0)  # warm-up, checked and discarded
        runs = [one_run(args, shape, jobs, args.seed + r) for r in range(args.repetitions)]
        rates = [r["jobs_per_s"] for r in runs]
        results[shape] = {"runs": runs, "median_jobs_per_s": statistics.median(rates)}
        latency = "-"
        if "p50_ms" in runs[0]:
            middle = sorted(runs, key=lambda r: r["jobs_per_s"])[len(runs) // 2]
            latency = " / ".join(f"{middle[f'p{q}_ms']:.1f}" for q in (50, 90, 99))
        print(f"| {shape} | {jobs:,} | {statistics.median(rates):,.0f} | {min(rates):,.0f} | "
              f"{max(rates):,.0f} | {latency} |")  # fmt: skip
    write_once(args.out, results)


if __name__ == "__main__":
    main()
