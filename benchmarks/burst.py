"""Burst benchmark: N delayed jobs, all due at one instant, released into a real broker and run
by real workers; every job must run exactly once or the run fails.

The shape of one repetition, for parallel-scheduler (and, with ``--peers``, for each peer):

1. a fresh storage prefix, broker queue and result list; ``--workers`` real worker processes and
   (for parallel-scheduler) a ``DelayedJobScheduler`` in its own process;
2. ``--callers`` threads schedule ``--jobs`` jobs through the public API (``Client.schedule_many``)
   in calls of ``--call-size`` jobs, every job due at the same instant ``lead`` seconds ahead;
3. at that instant the scheduler releases the burst into the broker and the workers execute it;
   each execution appends its task id and time to a Redis list;
4. the oracles: every scheduled job executed once (lost, duplicated, not scheduled, unexpected,
   left in storage all 0); only then are figures computed;
5. everything the repetition created is removed.

``--warmup`` small runs come first and are not kept; ``--repetitions`` runs are, and the report
gives each figure's median over them (every repetition is in the JSON). Ids and payloads come
from ``--seed``, so every system and every run of the benchmark sees the same workload.

    .venv/bin/python -m benchmarks.burst --storage-url redis://127.0.0.1:6379/0 \\
        --release-mode batch --out burst.json --markdown burst.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.brokers import is_redis
from benchmarks.harness.measure import ResourceMonitor, process_groups
from benchmarks.harness.options import add_broker, add_run_options, parse_checked
from benchmarks.harness.oracles import executions, oracles, wait_for_completion
from benchmarks.harness.peers import PEERS, SYSTEMS, parse_peers
from benchmarks.harness.report import conclude, environment, load_average, options, write_once
from benchmarks.harness.report.burst import figures, markdown_report
from benchmarks.harness.systems import BurstConfig, ParallelScheduler, RunContext, System
from benchmarks.harness.workloads import plan_jobs, schedule_concurrently

# -- one repetition --------------------------------------------------------------------------------


@dataclass
class Repetition:
    """One repetition: what ran, then its checks (``oracles``, each a count that must be 0), what
    went wrong, and its figures (computed only once the checks pass)."""

    system: str
    label: str
    jobs: int
    lead: float
    oracles: dict[str, int]
    problems: list[str]
    figures: dict[str, Any]


def run_repetition(
    system: System, ns: argparse.Namespace, cfg: BurstConfig, label: str, count: int, lead: float
) -> Repetition:
    run_id = uuid.uuid4().hex[:10]
    results = redis.Redis.from_url(cfg.results_url)
    with tempfile.TemporaryDirectory(prefix="ps-burst-") as tmp:
        ctx = RunContext(run_id, Path(tmp))
        try:
            system.start(ctx)
            return _measure(system, ns, cfg, ctx, results, label, count, lead)
        finally:
            system.stop()
            system.clean(ctx)
            results.delete(ctx.results_key)


def _measure(
    system: System,
    ns: argparse.Namespace,
    cfg: BurstConfig,
    ctx: RunContext,
    results: redis.Redis,
    label: str,
    count: int,
    lead: float,
) -> Repetition:
    monitor = ResourceMonitor(process_groups(system, cfg))
    monitor.start()
    due_at = system.now() + lead
    planned = plan_jobs(ns.seed, label, count, due_at, ns.spread, ns.payload_bytes)
    monitor.mark("scheduling")
    scheduling = schedule_concurrently(system, planned, ns.callers, ns.call_size)
    monitor.mark("waiting")
    time.sleep(max(0.0, due_at - system.now()))
    monitor.mark("release and execution")
    wait_for_completion(system, results, ctx.results_key, scheduling.created, ns.timeout)
    monitor.mark("end")
    time.sleep(ns.settle)  # a late duplicate would land now
    runs = executions(results, ctx.results_key)
    left = _left_in_storage(system, scheduling.created)
    system.stop()
    sent = system.sent_times()
    monitor.stop()
    found = oracles(planned, scheduling, runs)
    found["left_in_storage"] = left
    problems = scheduling.errors[:5]
    if scheduling.ended > due_at:
        problems.append(
            f"scheduling ended {scheduling.ended - due_at:.1f} s after the jobs fell due: "
            "the burst overlapped scheduling; raise --lead"
        )
    found_figures = figures(planned, scheduling, runs, sent, system, monitor)
    return Repetition(
        system.name,
        label,
        count,
        round(lead, 1),
        oracles=found,
        problems=problems,
        figures=found_figures,
    )


def _left_in_storage(system: System, created: int) -> int:
    """parallel-scheduler only: jobs not marked Enqueued once everything ran."""
    if not isinstance(system, ParallelScheduler):
        return 0
    return created - int(system.storage_counts().get("enqueued", 0))


# -- the run ---------------------------------------------------------------------------------------


def _lead(ns: argparse.Namespace, count: int, rate: float | None) -> float:
    """Seconds from planning to the due instant: long enough for scheduling to finish first, so
    the burst is a burst and not a trickle behind the callers.

    ``--lead`` if given; otherwise 1.5x the time this system's last run (a warm-up, at first)
    says scheduling ``count`` jobs takes, plus 3 s; with no run yet, a guess of 2,000 jobs/s.
    """
    if ns.lead is not None:
        return float(ns.lead)
    if rate:
        return 3.0 + 1.5 * count / rate
    return 5.0 + count / 2000


def run_system(kind: str, ns: argparse.Namespace, cfg: BurstConfig) -> dict[str, Any]:
    """Warm-ups (checked, not kept), then the retained repetitions of one system."""
    kept: list[Repetition] = []
    warmups: list[Repetition] = []
    rate: float | None = None
    plan = [("warmup", ns.warmup_jobs)] * ns.warmup + [("rep", ns.jobs)] * ns.repetitions
    for n, (phase, count) in enumerate(plan):
        system = SYSTEMS[kind](cfg)
        label = f"{phase}{n}"
        print(f"burst: {system.name}: {label}, {count:,} jobs", flush=True)
        rep = run_repetition(system, ns, cfg, label, count, _lead(ns, count, rate))
        (warmups if phase == "warmup" else kept).append(rep)
        rate = rep.figures["schedule_jobs_per_s"] or rate
        failed = {k: v for k, v in rep.oracles.items() if v}
        print(
            f"burst: {system.name}: {label} oracles {'FAILED ' + str(failed) if failed else 'ok'}"
        )
    return {"system": SYSTEMS[kind].name, "warmups": warmups, "repetitions": kept}


def _config(ns: argparse.Namespace) -> BurstConfig:
    results_url = ns.results_url or (
        ns.broker_url if is_redis(ns.broker_url) else "redis://127.0.0.1:6379/0"
    )
    return BurstConfig.from_options(ns, results_url=results_url)


CHOICES = [  # the product's defaults first: batch claims, fast publish
    ("--release-mode", ("batch", "per_job"), "how due jobs are claimed"),
    ("--dispatcher", ("fast_publish", "send_task"),
     "fast_publish: one round trip per chunk to a Redis broker (RedisPublisher)"),
    ("--pool", ("prefork", "solo"),
     "prefork: one celery worker with --workers children; solo: --workers solo workers"),
]  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=50_000)
    p.add_argument("--callers", type=int, default=60, help="concurrent scheduling threads")
    p.add_argument("--call-size", type=int, default=833, help="jobs per schedule_many call")
    p.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    add_broker(p, "redis://127.0.0.1:6379/0")
    p.add_argument("--results-url", help="Redis for the execution list (default: the broker)")
    p.add_argument("--parallelism", type=int, default=10, help="max_degree_of_parallelism")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--poll-interval", type=float, default=1.0)
    for flag, choices, meaning in CHOICES:  # the first choice is the default
        p.add_argument(flag, choices=choices, default=choices[0], help=meaning)
    p.add_argument(
        "--accept-time-messages",
        action="store_true",
        help="with fast_publish: the callers build each broker message as they store the job "
        "(with Redis storage on the broker's server, each batch is then released by one script)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--caller-pool", type=int, default=10, help="storage connections callers share")
    p.add_argument("--lead", type=float, help="seconds from planning to the due instant")
    p.add_argument("--spread", type=float, default=0.0, help="spread due times over S seconds")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--warmup-jobs", type=int, default=2000)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument(
        "--peers", type=parse_peers, default=[], help=f"'all' or some of {','.join(PEERS)}"
    )
    add_run_options(p, timeout=600.0, timeout_help="per repetition, for the burst")
    p.add_argument("--markdown", type=Path, help="Markdown report (never overwritten)")
    ns = parse_checked(p, argv, redis_broker=False, outputs=("out", "markdown"))
    if min(ns.jobs, ns.callers, ns.call_size, ns.workers, ns.repetitions) < 1:
        p.error("--jobs, --callers, --call-size, --workers and --repetitions must be >= 1")
    if not is_redis(ns.broker_url) and (
        ns.dispatcher == "fast_publish" or {"rq", "huey"} & set(ns.peers)
    ):
        p.error("--dispatcher fast_publish and the rq and huey peers need a Redis --broker-url")
    if ns.accept_time_messages and ns.dispatcher != "fast_publish":
        p.error("--accept-time-messages needs --dispatcher fast_publish")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    cfg = _config(ns)
    env = environment(cfg.results_url)
    systems = [run_system(kind, ns, cfg) for kind in ["parallel-scheduler", *ns.peers]]
    failures = [
        (s["system"], rep.label, {k: v for k, v in rep.oracles.items() if v})
        for s in systems
        for rep in [*s["warmups"], *s["repetitions"]]
        if any(rep.oracles.values())
    ]
    document = {
        "benchmark": "burst",
        "passed": not failures,
        "options": options(ns),
        "environment": {**env, "load_average_at_end": load_average()},
        "oracle_failures": failures,
    }
    if not failures:  # the oracles come first: a failing run reports no figure
        document["systems"] = [
            {
                "system": s["system"],
                "warmups": [
                    {"label": w.label, "jobs": w.jobs, "oracles": w.oracles} for w in s["warmups"]
                ],
                "repetitions": [asdict(r) for r in s["repetitions"]],
            }
            for s in systems
        ]
    found = [(f"{name} {label}", oracle) for name, label, oracle in failures]
    status = conclude("burst", document, found, markdown_report, ns.out)
    if not failures:
        write_once(ns.markdown, markdown_report(document), text=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
