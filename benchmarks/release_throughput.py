"""Release throughput: due jobs moved from storage into a real Celery broker, per release path.

    .venv/bin/python benchmarks/release_throughput.py --broker redis \\
        --storage-url redis://127.0.0.1:6379/0 --jobs 50000 --out release.json
    .venv/bin/python benchmarks/release_throughput.py --broker amqp --jobs 50000 --batch-size 1000

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
import random
import resource
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from harness.amqp import delete_queue, drain_ids, queue_count
from harness.brokers import queued_ids
from harness.celery_apps import build_celery_app
from harness.report import load_average, refuse_existing, write_once

import storage_adapters
from parallel_scheduler import CeleryDispatcher, DelayedJobScheduler, JobState, Settings
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.envelopes import EnvelopeMaker, with_envelopes
from parallel_scheduler.jobs import JobSpec
from storage_adapters import Storage

#: broker -> path -> (release mode, dispatcher, broker messages built at accept time)
PATHS = {
    "redis": {
        "per_job + send_task": ("per_job", "send_task", False),
        "batch + send_task": ("batch", "send_task", False),
        "batch + fast publish": ("batch", "fast", False),
        "batch + fast publish + accept-time messages": ("batch", "fast", True),
    },
    "amqp": {
        "per_job + send_task": ("per_job", "send_task", False),
        "batch + send_task": ("batch", "send_task", False),
        "batch + AmqpPublisher (transaction)": ("batch", "transaction", False),
        "batch + AmqpPublisher (confirms)": ("batch", "confirms", False),
    },
}
DEFAULT_URL = {"redis": "redis://127.0.0.1:6379/0", "amqp": "amqp://guest:guest@127.0.0.1:5672//"}
BASELINE = {"redis": "per_job + send_task", "amqp": "batch + send_task"}


def store_due_jobs(
    storage: Storage, jobs: int, rng: random.Random, queue: str, maker: EnvelopeMaker | None
) -> None:
    now = storage.now()
    for first in range(0, jobs, 5000):
        specs = [
            JobSpec(
                "bench.noop",
                args=[i, rng.random()],
                kwargs={"k": "v" * 8},
                options={"queue": queue},
                id=f"j{i}",
            )
            for i in range(first, min(jobs, first + 5000))
        ]
        storage.add_jobs(with_envelopes([spec.encode(now - 1) for spec in specs], maker))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dispatcher_for(kind: str, app: Any) -> Dispatcher:
    if kind == "send_task":
        return CeleryDispatcher(app)
    if kind == "fast":
        from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

        return RedisPublisher(app)
    from parallel_scheduler.celery.publish.amqp import AmqpPublisher

    return AmqpPublisher(app, guarantee=kind)  # type: ignore[arg-type]


def check_broker(
    args: argparse.Namespace, path: str, queue: str, kind: str, at_return: int
) -> None:
    """The broker's oracle: the queue holds each of the N jobs exactly once."""
    expected = {f"j{i}" for i in range(args.jobs)}
    if args.broker == "redis":
        ids = queued_ids(redis.Redis.from_url(args.broker_url), queue)
        held = sum(ids.values())
    else:
        if kind not in ("send_task", "fast") and at_return != args.jobs:
            sys.exit(f"{path}: the pass returned with {at_return} of {args.jobs} in the queue")
        held, ids = drain_ids(args.broker_url, queue, args.jobs)
    if held != args.jobs or set(ids) != expected or max(ids.values()) != 1:
        sys.exit(f"{path}: the queue held {held} messages, not each of {args.jobs} jobs once")


def remove_queue(args: argparse.Namespace, queue: str) -> None:
    if args.broker == "amqp":
        delete_queue(args.broker_url, queue)
        return
    broker = redis.Redis.from_url(args.broker_url)
    for key in broker.scan_iter(match=f"{queue}*"):
        broker.delete(key)
    broker.delete(f"_kombu.binding.{queue}")


def one_run(args: argparse.Namespace, path: str, seed: int) -> tuple[float, float]:
    """jobs/s, and the CPU seconds this process spent per 1,000 jobs released."""
    release_mode, kind, envelopes = PATHS[args.broker][path]
    prefix = "bench" + uuid.uuid4().hex[:8]
    queue = f"ps-bench-{'amqp-' if args.broker == 'amqp' else ''}{prefix}"
    storage = storage_adapters.from_url(args.storage_url, prefix=prefix, pool_size=args.parallelism)
    storage.setup()
    app = build_celery_app(args.broker_url, queue, name="bench", isolated=False)
    dispatcher = dispatcher_for(kind, app)
    try:
        maker = dispatcher if envelopes else None
        store_due_jobs(storage, args.jobs, random.Random(seed), queue, maker)  # type: ignore[arg-type]
        settings = Settings(
            release_mode=release_mode,  # type: ignore[arg-type]
            batch_size=args.batch_size,
            max_degree_of_parallelism=args.parallelism,
        )
        scheduler = DelayedJobScheduler(storage, dispatcher, settings)
        started, cpu = time.perf_counter(), cpu_seconds()
        stats = scheduler.run_once()
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        at_return = queue_count(args.broker_url, queue) if args.broker == "amqp" else 0
        scheduler.close()
        # The oracles, before the figure is kept
        counts = storage.count_by_state()
        if counts[JobState.ENQUEUED] != args.jobs or stats.released != args.jobs:
            sys.exit(f"{path}: {counts} released={stats.released}, expected {args.jobs} enqueued")
        check_broker(args, path, queue, kind, at_return)
        return args.jobs / elapsed, cpu * 1000 / args.jobs
    finally:
        close = getattr(dispatcher, "close", None)
        if args.broker == "amqp" and close is not None:
            close()
        remove_queue(args, queue)
        storage.drop()
        storage.close()


def measure(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Warm-ups, then the repetitions: per path (Redis) or in rounds over the paths (RabbitMQ)."""
    warm = argparse.Namespace(**{**vars(args), "jobs": min(args.jobs, 5000)})
    rows = results["paths"]

    def keep(path: str, r: int) -> None:
        rate, cpu = one_run(args, path, args.seed + r)
        rows[path]["jobs_per_s"].append(rate)
        rows[path]["cpu_ms_per_1000"].append(cpu * 1000)
        print(f"round {r + 1}, {path}: {rate:,.0f} jobs/s, {cpu * 1000:,.0f} ms CPU per 1,000")

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
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--paths", nargs="*", help="default: every path of the broker "
                        "(for amqp, all but per_job + send_task)")  # fmt: skip
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    refuse_existing(parser, args.out)
    args.broker_url = args.broker_url or DEFAULT_URL[args.broker]
    known = list(PATHS[args.broker])
    if args.paths is None:
        args.paths = [p for p in known if args.broker == "redis" or not p.startswith("per_job")]
    if unknown := set(args.paths) - set(known):
        parser.error(f"unknown path(s) {sorted(unknown)} for --broker {args.broker}: {known}")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}, "paths": {}}
    results["load_before"] = load_average()
    measure(args, results)
    results["load_after"] = load_average()
    print_table(args, results)
    write_once(args.out, results)


if __name__ == "__main__":
    main()
