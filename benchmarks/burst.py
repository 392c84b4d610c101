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

    .venv/bin/python benchmarks/burst.py --storage-url redis://127.0.0.1:6379/0 \\
        --release-mode batch --out burst.json --markdown burst.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
from burst_measure import ProcessGroup, ResourceMonitor, distribution, merge_pids, server_pid
from burst_report import markdown_report, print_summary
from burst_systems import (
    PEERS,
    SYSTEMS,
    BurstConfig,
    ParallelScheduler,
    PlannedJob,
    RunContext,
    System,
    is_redis,
)

# -- the workload ----------------------------------------------------------------------------------


def plan_jobs(
    seed: int, label: str, count: int, due_at: float, spread: float, payload: int
) -> list[PlannedJob]:
    """The same ids and payloads for every system in a repetition: drawn from ``seed`` and the
    repetition's label only."""
    rng = random.Random(f"{seed}/{label}")
    return [
        PlannedJob(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            index=i,
            token=rng.randbytes(payload // 2).hex(),
            due_at=due_at + (spread * i / count if count > 1 else 0.0),
        )
        for i in range(count)
    ]


def calls_of(jobs: list[PlannedJob], size: int) -> list[list[PlannedJob]]:
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


@dataclass
class Scheduling:
    """What the callers did: per-call latency, accepted jobs, and the phase's wall-clock span."""

    latencies: list[float] = field(default_factory=list)
    created: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0


def schedule_concurrently(
    system: System, jobs: list[PlannedJob], callers: int, size: int
) -> Scheduling:
    """``callers`` threads take calls from one list until none is left, as a burst of web requests
    would; a failed call counts its jobs as not scheduled, it does not stop the others."""
    result = Scheduling()
    guard = threading.Lock()

    def one_call(call: list[PlannedJob]) -> None:
        began = time.perf_counter()
        try:
            created = system.schedule(call)
        except Exception as exc:
            with guard:
                result.errors.append(f"{type(exc).__name__}: {exc}")
            return
        took = time.perf_counter() - began
        with guard:
            result.latencies.append(took)
            result.created += created

    result.started = time.time()
    with ThreadPoolExecutor(callers, thread_name_prefix="burst-caller") as pool:
        list(pool.map(one_call, calls_of(jobs, size)))
    result.ended = time.time()
    return result


# -- one repetition --------------------------------------------------------------------------------


@dataclass
class Repetition:
    system: str
    label: str
    jobs: int
    lead: float
    oracles: dict[str, int]
    figures: dict[str, Any]
    problems: list[str]


def executions(client: redis.Redis, key: str) -> list[tuple[str, float, float | None]]:
    """Every recorded execution: (task id, executed at, sent at if the system knew it)."""
    rows: list[tuple[str, float, float | None]] = []
    for first in range(0, int(client.llen(key)), 10_000):
        for raw in client.lrange(key, first, first + 9_999):
            parts = (raw.decode() if isinstance(raw, bytes) else raw).split()
            rows.append((parts[0], float(parts[1]), float(parts[2]) if len(parts) > 2 else None))
    return rows


def wait_for_completion(
    system: System, results: redis.Redis, key: str, expected: int, timeout: float
) -> None:
    """Until every accepted job executed (and, for parallel-scheduler, was released), or timeout;
    a timeout is not an error here: the oracles then report what is missing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        released = not isinstance(system, ParallelScheduler) or system.released_count() >= expected
        if released and results.llen(key) >= expected:
            return
        time.sleep(0.05)


def oracles(
    planned: list[PlannedJob], scheduling: Scheduling, runs: list[tuple[str, float, float | None]]
) -> dict[str, int]:
    wanted = {job.id for job in planned}
    counts = Counter(task_id for task_id, _, _ in runs)
    return {
        "not_scheduled": len(planned) - scheduling.created,
        "lost": sum(1 for job_id in wanted if counts[job_id] == 0),
        "duplicated": sum(n - 1 for job_id, n in counts.items() if job_id in wanted and n > 1),
        "unexpected": sum(n for job_id, n in counts.items() if job_id not in wanted),
        "left_in_storage": 0,
    }


def process_groups(system: System, cfg: BurstConfig) -> list[ProcessGroup]:
    """Storage server, broker server, scheduler, workers and this process (the callers)."""
    groups = [ProcessGroup("callers (this process)", [os.getpid()], children=False)]
    storage = system.storage_url()
    storage_pid = server_pid(storage) if storage and not storage.startswith("sqlite") else None
    broker_pid = server_pid(cfg.broker_url)
    if storage_pid is not None and storage_pid != broker_pid:
        groups.append(ProcessGroup("storage server", [storage_pid]))
    if broker_pid is not None:
        shared = " (also storage)" if storage_pid == broker_pid else ""
        groups.append(ProcessGroup(f"broker server{shared}", [broker_pid]))
    if system.scheduler_pids():
        groups.append(ProcessGroup("scheduler", system.scheduler_pids()))
    groups.append(ProcessGroup("workers", merge_pids(system.worker_pids())))
    return groups


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
    figures = _figures(planned, scheduling, runs, sent, system, monitor)
    return Repetition(system.name, label, count, round(lead, 1), found, figures, problems)


def _left_in_storage(system: System, created: int) -> int:
    """parallel-scheduler only: jobs not marked Enqueued once everything ran."""
    if not isinstance(system, ParallelScheduler):
        return 0
    return created - int(system.storage_counts().get("enqueued", 0))


# -- figures ---------------------------------------------------------------------------------------


def _ms(values: Sequence[float]) -> dict[str, float]:
    summary = asdict(distribution([v * 1000 for v in values]))
    summary.pop("count")
    return {k: round(v, 1) for k, v in summary.items()}


def _figures(
    planned: list[PlannedJob],
    scheduling: Scheduling,
    runs: list[tuple[str, float, float | None]],
    sent: list[tuple[str, float]] | None,
    system: System,
    monitor: ResourceMonitor,
) -> dict[str, Any]:
    due = {job.id: job.due_at for job in planned}
    first_due = min(due.values())
    first_run: dict[str, tuple[float, float | None]] = {}
    for task_id, at, sent_at in runs:
        first_run.setdefault(task_id, (at, sent_at))
    if sent is None and any(s is not None for _, s in first_run.values()):
        sent = [(i, s) for i, (_, s) in first_run.items() if s is not None]
    span = max(scheduling.ended - scheduling.started, 1e-9)
    figures: dict[str, Any] = {
        "schedule_jobs_per_s": round(scheduling.created / span),
        "schedule_seconds": round(span, 2),
        "schedule_call_ms": _ms(scheduling.latencies),
        "execute_jobs_per_s": _rate(len(first_run), first_due, [a for a, _ in first_run.values()]),
        "due_to_executed_ms": _ms([a - due[i] for i, (a, _) in first_run.items() if i in due]),
        "release_jobs_per_s": None,
        "due_to_sent_ms": None,
        "release_measured_by": system.release_note,
        "cpu_seconds": monitor.cpu_by_phase(),
        "peak_memory_mib": monitor.peak_memory_mib(),
    }
    if sent:
        first_sent: dict[str, float] = {}
        for job_id, at in sent:
            first_sent.setdefault(job_id, at)
        figures["release_jobs_per_s"] = _rate(len(first_sent), first_due, list(first_sent.values()))
        figures["due_to_sent_ms"] = _ms([max(0.0, at - due[i]) for i, at in first_sent.items()])
    return figures


def _rate(count: int, first_due: float, times: list[float]) -> float | None:
    """Jobs per second from the first due instant to the last event."""
    if not times:
        return None
    return round(count / max(max(times) - first_due, 1e-3))


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
    return BurstConfig(
        storage_url=ns.storage_url,
        broker_url=ns.broker_url,
        results_url=results_url,
        release_mode=ns.release_mode,
        parallelism=ns.parallelism,
        batch_size=ns.batch_size,
        poll_interval=ns.poll_interval,
        dispatcher=ns.dispatcher,
        workers=ns.workers,
        caller_pool=ns.caller_pool,
        pool=ns.pool,
        accept_time_messages=ns.accept_time_messages,
    )


def _peers(value: str) -> list[str]:
    chosen = list(PEERS) if value == "all" else [p.strip() for p in value.split(",") if p.strip()]
    unknown = set(chosen) - set(PEERS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer(s) {sorted(unknown)}; known: {PEERS}")
    return chosen


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=50_000)
    p.add_argument("--callers", type=int, default=60, help="concurrent scheduling threads")
    p.add_argument("--call-size", type=int, default=833, help="jobs per schedule_many call")
    p.add_argument("--storage-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--results-url", help="Redis for the execution list (default: the broker)")
    p.add_argument("--release-mode", choices=("per_job", "batch"), default="per_job")
    p.add_argument("--parallelism", type=int, default=10, help="max_degree_of_parallelism")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument(
        "--dispatcher",
        choices=("send_task", "fast_publish"),
        default="send_task",
        help="fast_publish: one round trip per chunk to a Redis broker (RedisPublisher)",
    )
    p.add_argument(
        "--accept-time-messages",
        action="store_true",
        help="with fast_publish: the callers build each broker message as they store the job "
        "(with Redis storage on the broker's server, each batch is then released by one script)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument(
        "--pool",
        choices=("prefork", "solo"),
        default="prefork",
        help="prefork: one celery worker with --workers children; solo: --workers solo workers",
    )
    p.add_argument(
        "--caller-pool", type=int, default=10, help="storage connections the callers share"
    )
    p.add_argument("--lead", type=float, help="seconds from planning to the due instant")
    p.add_argument("--spread", type=float, default=0.0, help="spread due times over S seconds")
    p.add_argument("--payload-bytes", type=int, default=64, help="size of each job's token")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--warmup-jobs", type=int, default=2000)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0, help="per repetition, for the burst")
    p.add_argument("--settle", type=float, default=2.0, help="seconds to wait for late duplicates")
    p.add_argument("--peers", type=_peers, default=[], help=f"'all' or some of {','.join(PEERS)}")
    p.add_argument("--out", type=Path, help="JSON results (never overwritten)")
    p.add_argument("--markdown", type=Path, help="Markdown report (never overwritten)")
    ns = p.parse_args(argv)
    for path in (ns.out, ns.markdown):
        if path is not None and path.exists():
            p.error(f"{path} exists; the benchmark never overwrites results")
    if min(ns.jobs, ns.callers, ns.call_size, ns.workers, ns.repetitions) < 1:
        p.error("--jobs, --callers, --call-size, --workers and --repetitions must be >= 1")
    if not is_redis(ns.broker_url) and (
        ns.dispatcher == "fast_publish" or {"rq", "huey"} & set(ns.peers)
    ):
        p.error("--dispatcher fast_publish and the rq and huey peers need a Redis --broker-url")
    if ns.accept_time_messages and ns.dispatcher != "fast_publish":
        p.error("--accept-time-messages needs --dispatcher fast_publish")
    return ns


def environment(cfg: BurstConfig) -> dict[str, Any]:
    import celery
    import kombu

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "celery": celery.__version__,
        "kombu": kombu.__version__,
        "redis-py": redis.__version__,
        "argv": sys.argv,
    }
    info["redis_server"] = redis.Redis.from_url(cfg.results_url).info("server")["redis_version"]
    info["git_commit"] = _git("rev-parse", "HEAD")
    info["git_dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return info


def _git(*args: str) -> str:
    """The checkout's commit, so a figure can be traced to the code that produced it."""
    import subprocess

    done = subprocess.run(
        ["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    cfg = _config(ns)
    env = environment(cfg)
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
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ns).items()},
        "environment": {**env, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "oracle_failures": failures,
    }
    if failures:  # the oracles come first: a failing run reports no figure
        for name, label, found in failures:
            print(f"burst: FAILED {name} {label}: {found}", file=sys.stderr)
    else:
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
        print_summary(document)
    if ns.out is not None:
        ns.out.write_text(json.dumps(document, indent=2) + "\n")
    if ns.markdown is not None and not failures:
        ns.markdown.write_text(markdown_report(document))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
