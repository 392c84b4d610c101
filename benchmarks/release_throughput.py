"""Release throughput: due jobs moved from storage into a real Celery broker, per release path.

    .venv/bin/python benchmarks/release_throughput.py --storage-url redis://127.0.0.1:6379/0 \\
        --jobs 50000 --out release.json

For each path (per-job claims + send_task, batch claim + send_task, batch claim + the Redis fast
publish, and the same with broker messages built at accept time, which on one Redis server for
storage and broker releases each batch by one script) and each repetition: N jobs are stored
due, one scheduler drains them into a fresh broker queue, and the run is checked before any
figure is kept: every job Enqueued in storage, exactly N messages in the queue, each job id
exactly once. Warm-up runs are discarded; the seed fixes ids and payloads. The JSON output
refuses to overwrite an existing file.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from celery import Celery

import storage_adapters
from parallel_scheduler import CeleryDispatcher, DelayedJobScheduler, JobState, Settings
from parallel_scheduler.celery.redis_publisher import RedisPublisher
from parallel_scheduler.envelopes import EnvelopeMaker, with_envelopes
from parallel_scheduler.jobs import JobSpec
from storage_adapters import Storage

#: release mode, fast publish, broker messages built at accept time (envelopes)
PATHS = {
    "per_job + send_task": ("per_job", False, False),
    "batch + send_task": ("batch", False, False),
    "batch + fast publish": ("batch", True, False),
    "batch + fast publish + accept-time messages": ("batch", True, True),
}


def store_due_jobs(
    storage: Storage, jobs: int, rng: random.Random, queue: str, maker: EnvelopeMaker | None
) -> None:
    now = storage.now()
    for first in range(0, jobs, 5000):
        specs = [
            JobSpec("bench.noop", [i, rng.random()], {"k": "v" * 8}, {"queue": queue}, f"j{i}")
            for i in range(first, min(jobs, first + 5000))
        ]
        storage.add_jobs(with_envelopes([spec.encode(now - 1) for spec in specs], maker))


def queued_ids(broker: redis.Redis, queue: str) -> Counter[str]:
    ids: Counter[str] = Counter()
    for key in broker.scan_iter(match=f"{queue}*"):
        for raw in broker.lrange(key, 0, -1):
            ids[json.loads(raw)["headers"]["id"]] += 1
    return ids


def one_run(args: argparse.Namespace, path: str, seed: int) -> float:
    release_mode, fast, envelopes = PATHS[path]
    prefix = "bench" + uuid.uuid4().hex[:8]
    queue = f"ps-bench-{prefix}"
    storage = storage_adapters.from_url(args.storage_url, prefix=prefix, pool_size=args.parallelism)
    storage.setup()
    broker = redis.Redis.from_url(args.broker_url)
    app = Celery("bench", broker=args.broker_url)
    app.conf.task_serializer = "json"
    try:
        dispatcher = RedisPublisher(app) if fast else CeleryDispatcher(app)
        maker = dispatcher if envelopes and isinstance(dispatcher, RedisPublisher) else None
        store_due_jobs(storage, args.jobs, random.Random(seed), queue, maker)
        settings = Settings(
            release_mode=release_mode,  # type: ignore[arg-type]
            batch_size=args.batch_size,
            max_degree_of_parallelism=args.parallelism,
        )
        scheduler = DelayedJobScheduler(storage, dispatcher, settings)
        started = time.perf_counter()
        stats = scheduler.run_once()
        elapsed = time.perf_counter() - started
        scheduler.close()
        # The oracles, before the figure is kept
        counts = storage.count_by_state()
        ids = queued_ids(broker, queue)
        expected = {f"j{i}" for i in range(args.jobs)}
        if counts[JobState.ENQUEUED] != args.jobs or stats.released != args.jobs:
            sys.exit(f"{path}: {counts} released={stats.released}, expected {args.jobs} enqueued")
        if set(ids) != expected or max(ids.values()) != 1:
            sys.exit(f"{path}: the broker holds {sum(ids.values())} messages, not each job once")
        return args.jobs / elapsed
    finally:
        for key in broker.scan_iter(match=f"{queue}*"):
            broker.delete(key)
        broker.delete(f"_kombu.binding.{queue}")
        storage.drop()
        storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--paths", nargs="*", choices=list(PATHS), default=list(PATHS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.out is not None and args.out.exists():
        sys.exit(f"{args.out} exists; refusing to overwrite it")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}, "paths": {}}
    for path in args.paths:
        for _ in range(args.warmup):
            one_run(argparse.Namespace(**{**vars(args), "jobs": min(args.jobs, 5000)}), path, 0)
        rates = [one_run(args, path, args.seed + r) for r in range(args.repetitions)]
        results["paths"][path] = {"jobs_per_s": rates, "median": statistics.median(rates)}
    base = results["paths"].get("per_job + send_task", {}).get("median")
    print(
        f"| path ({args.jobs:,} jobs, storage {args.storage_url.split(':')[0]}) | median jobs/s "
        "| min | max | vs per_job + send_task |"
    )
    print("|---|---|---|---|---|")
    for path, row in results["paths"].items():
        ratio = f"{row['median'] / base:.1f}x" if base else "-"
        print(
            f"| {path} | {row['median']:,.0f} | {min(row['jobs_per_s']):,.0f} | "
            f"{max(row['jobs_per_s']):,.0f} | {ratio} |"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
