"""What recording execution outcomes costs a Celery worker: time per no-op task with
``record_outcomes`` on against off (target: under 5% extra).

Per repetition and mode, N jobs due now are stored and released into the broker (the release
path the plugin uses, ``send_task`` with the job id as the task id and the release's header),
framed by two plain mark calls; then one worker (``--pool solo``, so the figure is the task
path itself, not a pool's scheduling) is started on that queue. The time from the first mark to
the last, over N, is the time per task. Modes alternate (off, on, off, on, ...) so drift in the
machine's state falls on both.

Checks before any figure: every job is released once and enqueued; with recording on, every
job's outcome reaches storage exactly once (succeeded), with none dropped; with it off, none.

    .venv/bin/python -m benchmarks.outcome_cost --jobs 20000 --repetitions 5 \\
        --broker-url redis://127.0.0.1:6379/0 --storage-url redis://127.0.0.1:6379/0 \\
        --out outcome-cost.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis

import storage_adapters
from benchmarks.harness.outcome_app import MARK_TASK, NOOP_TASK, build_app
from benchmarks.harness.report import (
    conclude,
    environment,
    load_average,
    markdown_table,
    options,
    refuse_existing,
)
from devtools.processes import ChildProcess, clean_environment
from devtools.waiting import wait_until
from parallel_scheduler import Client, JobSpec, JobState
from parallel_scheduler.celery import CeleryDispatcher
from storage_adapters import OutcomeState, Storage

#: The target: recording on costs at most this much more per task than off.
TARGET_OVERHEAD = 0.05
MODES = ("off", "on")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.outcome_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per run")
    parser.add_argument("--repetitions", type=int, default=5, help="runs per mode")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--results-url", default=None, help="Redis for the marks (the broker's)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one run may take")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"), help="worker logs")
    parser.add_argument("--out", type=Path, default=None, help="JSON results (a new file)")
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    if ns.results_url is None:
        ns.results_url = ns.broker_url if ns.broker_url.startswith("redis") else ns.storage_url
    return ns


def release(ns: argparse.Namespace, app: Any, storage: Storage, queue: str) -> int:
    """Store ``ns.jobs`` no-op jobs due now and release them into ``queue``, framed by the two
    plain marks; how many were enqueued."""
    client = Client(storage, retry_for=30.0)
    specs = [
        JobSpec(NOOP_TASK, args=(i,), options={"queue": queue}, countdown=0) for i in range(ns.jobs)
    ]
    for start in range(0, len(specs), 1000):
        client.schedule_many(specs[start : start + 1000])
    app.send_task(MARK_TASK, ("first",), queue=queue)
    dispatcher = CeleryDispatcher(app)
    lock = storage.acquire_lock("delayed-scheduler", "outcome-cost", 300)
    assert lock is not None
    enqueued = 0
    while claims := storage.claim_due(1000, lock, 300):
        dispatcher.dispatch_many(claims)
        enqueued += len(storage.mark_enqueued(claims))
    storage.release_lock(lock)
    app.send_task(MARK_TASK, ("last",), queue=queue)
    return enqueued


def one_run(ns: argparse.Namespace, mode: str, number: int) -> dict[str, Any]:
    run = uuid.uuid4().hex[:10]
    queue, prefix, key = f"bench-outcomes-{run}", f"bo{run}", f"bench-outcomes:{run}"
    storage = storage_adapters.from_url(ns.storage_url, prefix=prefix)
    storage.setup()
    results = redis.Redis.from_url(ns.results_url)
    app = build_app(ns.broker_url, queue, ns.storage_url, prefix)
    worker: ChildProcess | None = None
    try:
        enqueued = release(ns, app, storage, queue)
        env = clean_environment(
            BENCH_BROKER_URL=ns.broker_url, BENCH_QUEUE=queue, BENCH_STORAGE_URL=ns.storage_url,
            BENCH_PREFIX=prefix, BENCH_RESULTS_URL=ns.results_url, BENCH_RESULTS_KEY=key,
            PARALLEL_SCHEDULER_RECORD_OUTCOMES="true" if mode == "on" else "false",
        )  # fmt: skip
        command = [
            sys.executable, "-m", "celery", "-A", "benchmarks.harness.outcome_app", "worker",
            "-Q", queue, "--pool", "solo", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel=WARNING", f"--hostname=bench-{run}@%h",
        ]  # fmt: skip
        worker = ChildProcess(ns.workdir, f"outcome-cost-{run}", command, env)
        wait_until(lambda: results.llen(key) >= 2, timeout=ns.timeout)
        marks = dict(entry.decode().split(" ") for entry in results.lrange(key, 0, -1))
        seconds = float(marks["last"]) - float(marks["first"])
        recorded = 0
        if mode == "on":  # the writer flushes within a second of the last task
            wait_until(lambda: _succeeded(storage) >= ns.jobs, timeout=60)
            time.sleep(1.0)  # room for a duplicate to show, were there one
            recorded = _succeeded(storage)
        else:
            recorded = _succeeded(storage)
        worker.stop(timeout=60)
        log = worker.log()
        dropped = "dropped" in log and "execution outcome" in log
        states = storage.count_by_state()
        return {
            "mode": mode,
            "repetition": number,
            "jobs": ns.jobs,
            "enqueued": enqueued,
            "jobs_enqueued_in_storage": states[JobState.ENQUEUED],
            "outcomes_recorded": recorded,
            "drop_warning": dropped,
            "seconds": seconds,
            "us_per_task": seconds / ns.jobs * 1e6,
        }
    finally:
        if worker is not None:
            worker.end(grace=10)
        results.delete(key, queue)
        storage.drop()
        storage.close()


def _succeeded(storage: Storage) -> int:
    return storage.outcome_counts().get(NOOP_TASK, {}).get(OutcomeState.SUCCEEDED, 0)


def checks(runs: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    failures: list[tuple[str, Any]] = []
    for run in runs:
        label = f"{run['mode']} #{run['repetition']}"
        if run["enqueued"] != run["jobs"] or run["jobs_enqueued_in_storage"] != run["jobs"]:
            failures.append((f"{label}: every job released once", run))
        wanted = run["jobs"] if run["mode"] == "on" else 0
        if run["outcomes_recorded"] != wanted or run["drop_warning"]:
            failures.append((f"{label}: outcomes recorded {wanted}, none dropped", run))
    return failures


def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    median = {
        mode: statistics.median(r["us_per_task"] for r in runs if r["mode"] == mode)
        for mode in MODES
    }
    overhead = median["on"] / median["off"] - 1
    return {
        "median_us_per_task": {mode: round(value, 1) for mode, value in median.items()},
        "overhead": round(overhead, 4),
        "target_overhead": TARGET_OVERHEAD,
        "within_target": overhead <= TARGET_OVERHEAD,
    }


def summary(document: dict[str, Any]) -> str:
    table = markdown_table(
        ["mode", "repetition", "jobs", "µs per task"],
        [
            (r["mode"], r["repetition"], r["jobs"], f"{r['us_per_task']:.1f}")
            for r in document["runs"]
        ],
        "lrrr",
    )
    result = document["figures"]
    verdict = "within" if result["within_target"] else "OVER"
    return (
        f"{table}\n\nrecording on costs {result['overhead']:+.1%} per task "
        f"({verdict} the {TARGET_OVERHEAD:.0%} target)"
    )


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    document: dict[str, Any] = {
        "scenario": "outcome_cost",
        "options": options(ns),
        "environment": environment(ns.results_url),
    }
    runs = [
        one_run(ns, mode, number)
        for number in range(1, ns.repetitions + 1)
        for mode in MODES  # alternating, so drift falls on both
    ]
    document["runs"] = runs
    failures = checks(runs)
    document["figures"] = figures(runs) if not failures else None
    document["passed"] = not failures
    document["environment"]["load_average_at_end"] = load_average()
    return conclude("outcome_cost", document, failures, summary, ns.out)


if __name__ == "__main__":
    sys.exit(main())
