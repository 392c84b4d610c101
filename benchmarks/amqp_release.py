"""Release throughput into RabbitMQ: ``send_task`` per job against the AMQP fast path.

    .venv/bin/python benchmarks/amqp_release.py --jobs 50000 --batch-size 1000

For each path (batch claim + ``send_task``; batch claim + ``AmqpPublisher`` with one transaction
per chunk, its default; the same with publisher confirms; optionally per-job claims +
``send_task``) and each repetition: N jobs are stored due, one scheduler pass drains them into a
fresh, durable RabbitMQ queue, and the run is checked before its figure is kept: every job
Enqueued in storage, the queue holding exactly N messages (for the AMQP fast path already the
moment the pass returns: it returns only once the broker has them; ``send_task`` does not wait
for the broker, so its last messages get a moment to arrive), and every one of them consumed
back with each job id exactly once. Repetitions take the paths in turn (one round of every
path, then the next round), so background load on a shared machine falls on all of them alike;
besides jobs/s, the releasing process's CPU time per 1,000 jobs is reported, which load disturbs
less. Warm-up runs are discarded; the seed fixes ids and payloads. The queue and the storage
prefix of each run are deleted afterwards. The JSON output (``--out``) refuses to overwrite an
existing file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from celery import Celery
from kombu import Connection

import storage_adapters
from parallel_scheduler import CeleryDispatcher, DelayedJobScheduler, JobState, Settings
from parallel_scheduler.celery.amqp_publisher import AmqpPublisher
from parallel_scheduler.dispatchers import Dispatcher
from parallel_scheduler.jobs import JobSpec
from storage_adapters import Storage

#: path -> (release mode, dispatcher)
PATHS = {
    "per_job + send_task": ("per_job", "send_task"),
    "batch + send_task": ("batch", "send_task"),
    "batch + AmqpPublisher (transaction)": ("batch", "transaction"),
    "batch + AmqpPublisher (confirms)": ("batch", "confirms"),
}
DEFAULT_PATHS = [path for path in PATHS if not path.startswith("per_job")]


def store_due_jobs(storage: Storage, jobs: int, rng: random.Random, queue: str) -> None:
    now = storage.now()
    for first in range(0, jobs, 5000):
        specs = [
            JobSpec("bench.noop", [i, rng.random()], {"k": "v" * 8}, {"queue": queue}, f"j{i}")
            for i in range(first, min(jobs, first + 5000))
        ]
        storage.add_jobs([spec.encode(now - 1) for spec in specs])


def queue_count(broker_url: str, queue: str) -> int:
    with Connection(broker_url) as connection, connection.channel() as channel:
        return int(channel.queue_declare(queue, passive=True).message_count)


def drain_ids(
    broker_url: str, queue: str, expected: int, timeout: float = 60.0
) -> tuple[int, Counter[str]]:
    """How many messages the queue held once ``expected`` arrived (or 30 s passed: send_task
    does not wait for the broker, so its last messages may still be on their way), and the
    job ids of all of them, consumed."""
    ids: Counter[str] = Counter()
    settle = time.monotonic() + 30
    while (held := queue_count(broker_url, queue)) < expected and time.monotonic() < settle:
        time.sleep(0.05)
    with Connection(broker_url) as connection:
        channel = connection.channel()
        held = int(channel.queue_declare(queue, passive=True).message_count)

        def take(message: Any) -> None:
            ids[message.properties["application_headers"]["id"]] += 1

        channel.basic_consume(queue, no_ack=True, callback=take)
        deadline = time.monotonic() + timeout
        while sum(ids.values()) < held and time.monotonic() < deadline:
            connection.drain_events(timeout=max(0.1, deadline - time.monotonic()))
        left = int(channel.queue_declare(queue, passive=True).message_count)
        if left:
            sys.exit(f"{left} message(s) still in {queue} after consuming {held}")
    return held, ids


def delete_queue(broker_url: str, queue: str) -> None:
    with Connection(broker_url) as connection, connection.channel() as channel:
        channel.queue_delete(queue)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_run(args: argparse.Namespace, path: str, seed: int) -> tuple[float, float]:
    """jobs/s, and the CPU seconds this process spent per 1,000 jobs released."""
    release_mode, kind = PATHS[path]
    prefix = "bench" + uuid.uuid4().hex[:8]
    queue = f"ps-bench-amqp-{prefix}"
    storage = storage_adapters.from_url(args.storage_url, prefix=prefix, pool_size=args.parallelism)
    storage.setup()
    app = Celery("bench", broker=args.broker_url)
    app.conf.task_serializer = "json"
    dispatcher: Dispatcher = (
        CeleryDispatcher(app) if kind == "send_task" else AmqpPublisher(app, guarantee=kind)  # type: ignore[arg-type]
    )
    try:
        store_due_jobs(storage, args.jobs, random.Random(seed), queue)
        settings = Settings(
            release_mode=release_mode,  # type: ignore[arg-type]
            batch_size=args.batch_size,
            max_degree_of_parallelism=args.parallelism,
        )
        scheduler = DelayedJobScheduler(storage, dispatcher, settings)
        started, cpu = time.perf_counter(), cpu_seconds()
        stats = scheduler.run_once()
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        at_return = queue_count(args.broker_url, queue)
        scheduler.close()
        # The oracles, before the figure is kept
        if kind != "send_task" and at_return != args.jobs:
            sys.exit(f"{path}: the pass returned with {at_return} of {args.jobs} in the queue")
        counts = storage.count_by_state()
        if counts[JobState.ENQUEUED] != args.jobs or stats.released != args.jobs:
            sys.exit(f"{path}: {counts} released={stats.released}, expected {args.jobs} enqueued")
        held, ids = drain_ids(args.broker_url, queue, args.jobs)
        expected = {f"j{i}" for i in range(args.jobs)}
        if held != args.jobs or set(ids) != expected or max(ids.values()) != 1:
            sys.exit(f"{path}: the queue held {held} messages, not each of {args.jobs} jobs once")
        return args.jobs / elapsed, cpu * 1000 / args.jobs
    finally:
        if isinstance(dispatcher, AmqpPublisher):
            dispatcher.close()
        delete_queue(args.broker_url, queue)
        storage.drop()
        storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--broker-url", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--paths", nargs="*", choices=list(PATHS), default=DEFAULT_PATHS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.out is not None and args.out.exists():
        sys.exit(f"{args.out} exists; refusing to overwrite it")
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}, "paths": {}}
    results["load_before"] = os.getloadavg()
    warm = argparse.Namespace(**{**vars(args), "jobs": min(args.jobs, 5000)})
    for path in args.paths:
        for _ in range(args.warmup):
            one_run(warm, path, 0)
        results["paths"][path] = {"jobs_per_s": [], "cpu_ms_per_1000": []}
    for r in range(args.repetitions):
        for path in args.paths:
            rate, cpu = one_run(args, path, args.seed + r)
            results["paths"][path]["jobs_per_s"].append(rate)
            results["paths"][path]["cpu_ms_per_1000"].append(cpu * 1000)
            print(f"round {r + 1}, {path}: {rate:,.0f} jobs/s, {cpu * 1000:,.0f} ms CPU per 1,000")
    results["load_after"] = os.getloadavg()
    base = statistics.median(results["paths"].get("batch + send_task", {}).get("jobs_per_s", [0]))
    storage_kind = args.storage_url.split(":")[0]
    print(
        f"\n| path ({args.jobs:,} jobs, batch {args.batch_size}, storage {storage_kind}, "
        "RabbitMQ) | median jobs/s | min | max | vs batch + send_task | CPU ms / 1,000 jobs |"
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
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
