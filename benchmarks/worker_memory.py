"""Worker memory with many delayed calls waiting: plain Celery, then with parallel-scheduler.

Celery keeps every ``countdown``/``eta`` task in the memory of the worker that received it (ETA
tasks bypass the prefetch limit), so a worker's RSS grows with the number of delayed calls
waiting. With the plugin installed, the same ``apply_async(countdown=3600)`` calls are stored
durably instead, and the worker should stay the size it started at. This script measures both on
real servers and real ``celery worker`` processes:

  (a) plain Celery: N calls into the broker; settled once the worker has received all of them
      and the broker queue is empty;
  (b) the plugin (``eta_threshold`` 60 s, storage from ``--storage-url``): the worker runs with
      ``--parallel-scheduler``; settled once storage holds all N calls.

For each it reports the worker's RSS (main process + pool children) before the calls and after
the worker has settled (each the largest of readings over ``--window`` seconds), the peak sampled
during the run, and how many calls per second the caller made. A scenario that does not settle
within ``--timeout`` is reported as such, with its RSS at the deadline: with RabbitMQ (Celery 5.7,
py-amqp 5.4) the plain worker raised its prefetch by one or two messages a second after the first
burst, so (a) there would take hours to settle; Redis is the default broker for that reason.

    .venv/bin/python -m benchmarks.worker_memory --jobs 100000 --out worker-memory.json

``--out`` never replaces an existing file. Everything the run creates (its queue, storage prefix,
worker processes) is removed at the end. The worker runs the harness's Celery app
(``celery -A harness.celery_apps``), configured through ``BENCH_*`` environment variables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path

from benchmarks.harness.celery_apps import ETA_THRESHOLD
from benchmarks.harness.delayed_calls import COUNTDOWN, Result, run_scenario
from benchmarks.harness.report import refuse_existing

# -- reporting -----------------------------------------------------------------------------------


def markdown(results: list[Result]) -> str:
    header = (
        "| scenario | delayed calls | worker RSS before | after | peak | growth | growth per call "
        "| caller calls/s | received by worker | in broker queue | in storage | settled after |"
    )
    rule = "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    rows = [
        f"| {r.scenario} | {r.jobs:,} | {r.rss_before_mib:.1f} MiB | {r.rss_after_mib:.1f} MiB "
        f"| {r.rss_peak_mib:.1f} MiB | {r.growth_mib:+.1f} MiB | {r.growth_bytes_per_job:,.0f} B "
        f"| {r.calls_per_second:,} | {r.worker_received:,} | {r.broker_queue_after:,} "
        f"| {r.stored:,} | {_settled(r.settle_seconds)} |"
        for r in results
    ]
    return "\n".join([header, rule, *rows])


def _settled(seconds: float | None) -> str:
    return "not within --timeout" if seconds is None else f"{seconds:.1f} s"


def _redacted(url: str) -> str:
    from storage_adapters import mask_url

    return mask_url(url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000, help="delayed calls (100000)")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0", help="Celery broker URL")
    parser.add_argument(
        "--storage-url",
        default="redis://127.0.0.1:6379/0",
        help="plugin storage (a unique prefix is used and dropped afterwards)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="worker pool size (1)")
    parser.add_argument("--window", type=float, default=2.0, help="seconds per RSS reading (2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait to settle")
    parser.add_argument(
        "--only", choices=("plain", "plugin"), help="run one scenario instead of both"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here (never replaced)")
    ns = parser.parse_args(argv)
    if ns.jobs < 1:
        parser.error("--jobs must be at least 1")
    refuse_existing(parser, ns.out)

    scenarios = [False, True] if ns.only is None else [ns.only == "plugin"]
    results = [run_scenario(ns, plugin) for plugin in scenarios]
    table = markdown(results)
    print()
    print(table)
    if ns.out is not None:
        report = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "broker": _redacted(ns.broker),
            "storage_url": _redacted(ns.storage_url),
            "countdown_seconds": COUNTDOWN,
            "eta_threshold_seconds": ETA_THRESHOLD,
            "worker_concurrency": ns.concurrency,
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "results": [asdict(r) for r in results],
            "markdown": table,
        }
        with ns.out.open("x") as out:  # "x": never replace a result someone kept
            json.dump(report, out, indent=2)
        print(f"\nwrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
