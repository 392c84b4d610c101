"""Accept rate: jobs stored per second through the public ``Client``, bulk and one call per job.

    .venv/bin/python -m benchmarks.accept_rate \\
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
import statistics
import sys
from typing import Any

from benchmarks.harness.accept_runs import accept_once
from benchmarks.harness.options import add_rounds, parse_checked
from benchmarks.harness.release_runs import CheckFailed, job_specs
from benchmarks.harness.report import environment, load_average, write_once


def one_run(args: argparse.Namespace, shape: str, jobs: int, seed: int) -> dict[str, float]:
    specs = job_specs(jobs, seed, "q", countdown=3600)
    try:
        return accept_once(
            args.storage_url, specs, shape=shape, callers=args.callers, call_size=args.call_size
        )
    except CheckFailed as failed:
        sys.exit(str(failed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--bulk-jobs", type=int, default=50_000)
    parser.add_argument("--single-jobs", type=int, default=10_000)
    parser.add_argument("--callers", type=int, default=8, help="concurrent threads")
    parser.add_argument("--call-size", type=int, default=1000, help="jobs per bulk call")
    parser.add_argument(
        "--shapes", nargs="*", choices=("bulk", "single"), default=["bulk", "single"]
    )
    add_rounds(parser, warmup=False)  # one warm-up per shape, of at most 2,000 jobs
    args = parse_checked(parser, None, redis_broker=False)
    if min(args.bulk_jobs, args.single_jobs, args.callers, args.call_size, args.repetitions) < 1:
        parser.error("job counts, --callers, --call-size and --repetitions must be >= 1")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}}
    results["environment"] = environment()  # the commit and the load average at the start
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
    results["environment"]["load_average_at_end"] = load_average()
    write_once(args.out, results)


if __name__ == "__main__":
    main()
