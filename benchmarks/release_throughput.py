"""Release throughput: due jobs moved from storage into a real Celery broker, per release path.

    .venv/bin/python -m benchmarks.release_throughput --broker redis \\
        --storage-url redis://127.0.0.1:6379/0 --jobs 50000 --out release.json
    .venv/bin/python -m benchmarks.release_throughput --broker amqp --jobs 50000 --batch-size 1000

Redis broker paths: per-job claims + send_task, batch claim + send_task, batch claim + the Redis
fast publish, and the same with broker messages built at accept time (which, on one Redis server
for storage and broker, releases each batch by one script). RabbitMQ paths: batch claim +
``send_task``; batch claim + ``AmqpPublisher`` with one transaction per chunk (its default); the
same with publisher confirms; optionally per-job claims + ``send_task``.

For each path and repetition, N jobs are stored due, one scheduler pass drains them into a fresh
broker queue, and the run is checked before any figure is kept: every job Enqueued in storage,
exactly N messages in the queue, each job id exactly once (RabbitMQ: for the AMQP fast path already
when the pass returns, since it returns only once the broker has them; every message is consumed
back). With Redis each path runs its warm-up then its repetitions; with RabbitMQ the repetitions
take the paths in turn (one round of every path, then the next), so background load on a shared
machine falls on all of them alike. Besides jobs/s, the releasing process's CPU time per 1,000
jobs is reported, which load disturbs less. Warm-up runs (5,000 jobs at most) are discarded; the
seed fixes ids and payloads; the queue and the storage prefix of each run are deleted afterwards.
The JSON output (``--out``) refuses to overwrite an existing file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from benchmarks.harness.options import add_rounds, parse_checked
from benchmarks.harness.release_runs import CheckFailed, ReleasePath, release_once
from benchmarks.harness.report import environment, load_average, write_once

#: broker -> path -> how it is configured
PATHS = {
    "redis": {
        "per_job + send_task": ReleasePath("per_job", "send_task", False),
        "batch + send_task": ReleasePath("batch", "send_task", False),
        "batch + fast publish": ReleasePath("batch", "fast", False),
        "batch + fast publish + accept-time messages": ReleasePath("batch", "fast", True),
    },
    "amqp": {
        "per_job + send_task": ReleasePath("per_job", "send_task", False),
        "batch + send_task": ReleasePath("batch", "send_task", False),
        "batch + AmqpPublisher (transaction)": ReleasePath("batch", "transaction", False),
        "batch + AmqpPublisher (confirms)": ReleasePath("batch", "confirms", False),
    },
}
DEFAULT_URL = {"redis": "redis://127.0.0.1:6379/0", "amqp": "amqp://guest:guest@127.0.0.1:5672//"}
BASELINE = {"redis": "per_job + send_task", "amqp": "batch + send_task"}


def one_run(args: argparse.Namespace, path: str, seed: int) -> tuple[float, float]:
    """jobs/s, and the CPU milliseconds this process spent per 1,000 jobs released."""
    try:
        return release_once(
            PATHS[args.broker][path],
            broker_url=args.broker_url,
            storage_url=args.storage_url,
            jobs=args.jobs,
            seed=seed,
            batch_size=args.batch_size,
            parallelism=args.parallelism,
        )
    except CheckFailed as failed:
        sys.exit(f"{path}: {failed}")


def measure(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Warm-ups, then the repetitions: per path (Redis) or in rounds over the paths (RabbitMQ)."""
    warm = argparse.Namespace(**{**vars(args), "jobs": min(args.jobs, 5000)})
    rows = results["paths"]

    def keep(path: str, r: int) -> None:
        rate, cpu = one_run(args, path, args.seed + r)
        rows[path]["jobs_per_s"].append(rate)
        rows[path]["cpu_ms_per_1000"].append(cpu)
        print(f"round {r + 1}, {path}: {rate:,.0f} jobs/s, {cpu:,.0f} ms CPU per 1,000")

    for path in args.paths:
        rows[path] = {"jobs_per_s": [], "cpu_ms_per_1000": []}
        for _ in range(args.warmup):
            one_run(warm, path, 0)
        if args.broker == "redis":
            for r in range(args.repetitions):
                keep(path, r)
    if args.broker == "amqp":
        for r in range(args.repetitions):
            for path in args.paths:
                keep(path, r)


def print_table(args: argparse.Namespace, results: dict[str, Any]) -> None:
    baseline = BASELINE[args.broker]
    base = statistics.median(results["paths"].get(baseline, {}).get("jobs_per_s") or [0])
    broker = "RabbitMQ" if args.broker == "amqp" else "Redis"
    print(
        f"\n| path ({args.jobs:,} jobs, batch {args.batch_size}, storage "
        f"{args.storage_url.split(':')[0]}, {broker}) | median jobs/s | min | max "
        f"| vs {baseline} | CPU ms / 1,000 jobs |"
    )
    print("|---|---|---|---|---|---|")
    for path, row in results["paths"].items():
        rates = row["jobs_per_s"]
        row["median"] = statistics.median(rates)
        ratio = f"{row['median'] / base:.1f}x" if base else "-"
        print(
            f"| {path} | {row['median']:,.0f} | {min(rates):,.0f} | {max(rates):,.0f} | {ratio} "
            f"| {statistics.median(row['cpu_ms_per_1000']):,.0f} |"
        )
    load = ", ".join(
        f"{a:.1f}/{b:.1f}"
        for a, b in zip(results["load_before"], results["load_after"], strict=True)
    )
    print(f"\nload average (1, 5, 15 min) before/after: {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=("redis", "amqp"), default="redis")
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--broker-url", help="default: the --broker's server on this machine")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--paths", nargs="*", help="default: every path of the broker "
                        "(for amqp, all but per_job + send_task)")  # fmt: skip
    add_rounds(parser)
    args = parse_checked(parser, None, redis_broker=False)
    args.broker_url = args.broker_url or DEFAULT_URL[args.broker]
    known = list(PATHS[args.broker])
    if args.paths is None:
        args.paths = [p for p in known if args.broker == "redis" or not p.startswith("per_job")]
    if unknown := set(args.paths) - set(known):
        parser.error(f"unknown path(s) {sorted(unknown)} for --broker {args.broker}: {known}")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}, "paths": {}}
    results["environment"] = environment()  # the commit, versions, CPUs
    results["load_before"] = load_average()
    measure(args, results)
    results["load_after"] = load_average()
    print_table(args, results)
    write_once(args.out, results)


if __name__ == "__main__":
    main()
