"""Steady lateness: a steady stream of due jobs (default 1,000 a second for 60 s) released by a
real scheduler process into a real Redis broker and run by a real Celery worker; how late does
each job reach the broker?

One run:

1. a fresh storage prefix (``--storage-url``), broker queue and result list; one ``celery
   worker`` (prefork, ``--workers`` children, the recording task of ``harness.celery_apps``) and
   one scheduler process: the product's ``SchedulerService`` built by the Celery integration, as
   ``celery parallel-scheduler`` builds it (``harness.service_process``), with the default
   settings except those given here (``--release-mode``, ``--fast-publish``, ...);
2. ``--callers`` threads schedule every job ahead of time through ``Client.schedule_many``, in
   calls of ``--call-size``: ``--rate`` x (``--warmup-seconds`` + ``--duration``) jobs whose due
   times are spread evenly at ``--rate`` per second, the first ``--lead`` seconds ahead (by
   default long enough for scheduling to finish first: the run fails if it did not);
3. the jobs fall due; the first ``--warmup-seconds`` are a warm-up (run and checked, never in a
   figure); those due in the next ``--duration`` seconds are the retained sample;
4. the oracles: every job released once and executed once (lost, duplicated, not scheduled,
   unexpected, left in storage, sent twice, never sent: all 0). Only then are figures computed;
5. everything the run created is removed.

Lateness is measured two ways, both against the due time stored with the job (storage clock):

* **due -> sent**, the headline: ``sent_at`` of the plugin's ``job_released`` signal, taken on
  the scheduler's storage clock after the broker accepted the message and the job was marked
  Enqueued: an upper bound on when the message reached the broker;
* **due -> started**: the worker's clock when the task body started (corrected by the measured
  offset between this machine's clock and the storage clock). It includes the broker queue and
  the worker; if the worker cannot keep up with ``--rate`` it grows over the run, which says
  nothing about the scheduler.

The scheduler process's CPU (user + system, between the window's marks) and RSS (psutil, once a
second) are reported for the retained window; its RSS includes the benchmark's own release log
(one id and time per job sent, about 11 MiB at 65,000 jobs). A pass repeats while full batches
come back, so a scheduler that falls behind shows few, long passes. Between passes the scheduler
sleeps until the next due time it peeked, or ``poll_interval`` if that is sooner; the idle time
between passes shows whether ``poll_interval`` ever bounded the lateness.

Ids and payloads come from ``--seed``. ``--out`` (JSON) is never overwritten.

    .venv/bin/python -m benchmarks.steady_lateness \\
        --storage-url postgresql://postgres@127.0.0.1:5432/test --out steady-pg.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.lateness import (
    RssTimeline,
    Window,
    clock_offset,
    figures,
    machine_cpu,
)
from benchmarks.harness.measure import ResourceMonitor, process_groups
from benchmarks.harness.options import add_broker, add_run_options, parse_checked
from benchmarks.harness.oracles import executions, oracles
from benchmarks.harness.oracles import wait_for_completion as wait_for_executions
from benchmarks.harness.report import conclude, environment, load_average, options
from benchmarks.harness.report.steady import TARGET_P99_MS, summary
from benchmarks.harness.service_system import ServiceScheduler as SteadyScheduler
from benchmarks.harness.systems import BurstConfig, RunContext
from benchmarks.harness.workloads import plan_jobs, schedule_concurrently
from parallel_scheduler import Settings

DEFAULTS = Settings()


# -- measuring ---------------------------------------------------------------------------------


def sleep_until(system: SteadyScheduler, moment: float) -> None:
    """Until ``moment`` on the storage clock."""
    time.sleep(max(0.0, moment - system.now()))


# -- one run -----------------------------------------------------------------------------------


def _lead(ns: argparse.Namespace, count: int) -> float:
    """Seconds from planning to the first due time: ``--lead``, or 5 s plus a conservative
    2,000 jobs/s for scheduling everything ahead (PostgreSQL with accept-time messages on a busy
    2-core machine stored 65,000 in more than 16 s)."""
    return float(ns.lead) if ns.lead is not None else 5.0 + count / 2000


def measure(
    system: SteadyScheduler,
    ns: argparse.Namespace,
    cfg: BurstConfig,
    ctx: RunContext,
    results: redis.Redis,
) -> dict[str, Any]:
    assert system.service is not None
    # PSS sampling reads every process's smaps: every 5 s, not to load the machine measured
    monitor = ResourceMonitor(process_groups(system, cfg), interval=5.0)
    memory = RssTimeline(system.service.pid)
    monitor.start()
    memory.start()
    count = round(ns.rate * (ns.warmup_seconds + ns.duration))
    first_due = system.now() + _lead(ns, count)
    planned = plan_jobs(ns.seed, "steady", count, first_due, count / ns.rate, ns.payload_bytes)
    window = Window(first_due + ns.warmup_seconds, first_due + ns.warmup_seconds + ns.duration)
    print(f"steady: scheduling {count:,} jobs ahead; the first falls due in "
          f"{first_due - system.now():.1f} s", flush=True)  # fmt: skip
    monitor.mark("scheduling")
    scheduling = schedule_concurrently(system, planned, ns.callers, ns.call_size)
    offset = clock_offset(system.now)
    problems = list(scheduling.errors[:5])
    if scheduling.ended + offset > first_due:
        problems.append(
            f"scheduling ended {scheduling.ended + offset - first_due:.1f} s after the first job "
            "fell due: the load was not steady; raise --lead"
        )
    monitor.mark("waiting")
    sleep_until(system, first_due)
    monitor.mark("warm-up")
    sleep_until(system, window.start)
    monitor.mark("retained")
    machine_before = machine_cpu()
    print(f"steady: retained window of {ns.duration:g} s begins", flush=True)
    sleep_until(system, window.end)
    machine = {k: round(v - machine_before[k], 1) for k, v in machine_cpu().items()}
    monitor.mark("drain")
    wait_for_executions(system, results, ctx.results_key, scheduling.created, ns.timeout)
    monitor.mark("end")
    time.sleep(ns.settle)  # a late duplicate would land now
    runs = executions(results, ctx.results_key)
    enqueued = int(system.storage_counts().get("enqueued", 0))
    system.stop()
    memory.halt.set()
    monitor.stop()
    assert system.log is not None
    found = oracles(planned, scheduling, runs)
    found["left_in_storage"] = scheduling.created - enqueued
    sent_ids = Counter(job_id for job_id, _ in system.log.sent)
    found["sent_twice"] = sum(n - 1 for n in sent_ids.values() if n > 1)
    found["never_sent"] = sum(1 for job in planned if sent_ids[job.id] == 0)
    record: dict[str, Any] = {
        "jobs": count,
        "first_due": first_due,
        "clock_offset_ms": round(offset * 1000, 3),
        "oracles": found,
        "problems": problems,
        "settings": system.log.settings,
    }
    if any(found.values()) or problems:
        return record  # the oracles come first: no figure of a failed run
    record["figures"] = figures(
        planned, scheduling, runs, system.log, window, offset, monitor, memory, machine, ns
    )
    return record


def run_once(ns: argparse.Namespace, cfg: BurstConfig, label: str) -> dict[str, Any]:
    results = redis.Redis.from_url(cfg.results_url)
    system = SteadyScheduler(cfg, ns.fast_publish)
    with tempfile.TemporaryDirectory(prefix="ps-steady-") as tmp:
        ctx = RunContext(uuid.uuid4().hex[:10], Path(tmp), "steady")
        try:
            system.start(ctx)
            record = measure(system, ns, cfg, ctx, results)
        finally:
            system.stop()
            system.clean(ctx)
            results.delete(ctx.results_key)
    record["label"] = label
    failed = {k: v for k, v in record["oracles"].items() if v}
    verdict = "FAILED " + str(failed) if failed or record["problems"] else "ok"
    print(f"steady: {label} oracles {verdict} {record['problems'] or ''}".rstrip(), flush=True)
    return record


# -- the command -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--storage-url", default="postgresql://postgres@127.0.0.1:5432/test")
    add_broker(p)
    p.add_argument("--results-url", help="Redis for the execution list (default: the broker)")
    p.add_argument("--rate", type=float, default=1000.0, help="due jobs per second")
    p.add_argument("--duration", type=float, default=60.0, help="seconds retained")
    p.add_argument("--warmup-seconds", type=float, default=5.0, help="seconds run, not retained")
    p.add_argument("--repetitions", type=int, default=1, help="runs (each with its warm-up)")
    p.add_argument("--release-mode", choices=("per_job", "batch"), default=DEFAULTS.release_mode)
    p.add_argument(
        "--fast-publish",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.fast_publish,
        help="the fast_publish setting (default: the product's); the callers then build each "
        "broker message as they store the job, as the plugin does",
    )
    p.add_argument("--poll-interval", type=float, default=DEFAULTS.poll_interval)
    p.add_argument("--parallelism", type=int, default=DEFAULTS.max_degree_of_parallelism)
    p.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size)
    p.add_argument("--workers", type=int, default=2, help="prefork children of the worker")
    p.add_argument("--callers", type=int, default=8, help="threads scheduling ahead")
    p.add_argument("--call-size", type=int, default=1000, help="jobs per schedule_many call")
    p.add_argument("--lead", type=float, help="seconds to the first due time (default: auto)")
    p.add_argument("--bin-seconds", type=float, default=10.0, help="timeline bin width")
    add_run_options(p, timeout=600.0, timeout_help="seconds to drain after the end")
    ns = parse_checked(p, argv)
    if ns.rate <= 0 or ns.duration <= 0 or ns.warmup_seconds < 0 or ns.repetitions < 1:
        p.error("--rate and --duration must be > 0, --warmup-seconds >= 0, --repetitions >= 1")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    cfg = BurstConfig.from_options(
        ns,
        results_url=ns.results_url or ns.broker_url,
        dispatcher="fast_publish" if ns.fast_publish else "send_task",
        caller_pool=ns.callers,
        # as the plugin does: with fast_publish, each broker message is built as the job is stored
        accept_time_messages=ns.fast_publish,
    )
    env = environment(cfg.results_url)
    runs = [run_once(ns, cfg, f"run {n + 1}") for n in range(ns.repetitions)]
    failed = [r for r in runs if any(r["oracles"].values()) or r["problems"]]
    document: dict[str, Any] = {
        "benchmark": "steady_lateness",
        "passed": not failed,
        "options": options(ns),
        "environment": {**env, "load_average_at_end": load_average()},
        "target": f"p99 due -> sent <= {TARGET_P99_MS:g} ms",
        "lateness_measured_by": "job_released signal sent_at (storage clock), after the broker "
        "accepted the message and the job was marked Enqueued; started: worker clock + offset",
        "runs": runs,
    }
    found = []
    for r in failed:
        oracle = {k: v for k, v in r["oracles"].items() if v}
        found.append((r["label"], f"{oracle} {r['problems']}"))
    return conclude("steady", document, found, summary, ns.out)


if __name__ == "__main__":
    sys.exit(main())
