"""Memory with 1,000,000 delayed jobs waiting: the scheduler process, a Celery worker with the
plugin, and plain Celery's worker holding countdowns (measured at ``--plain-celery-jobs`` and
extrapolated, labelled as such).

For each ``--storage-url`` (PostgreSQL and Redis by default), with a storage prefix of its own:

1. a scheduler process (the product's ``SchedulerService`` built by the Celery integration,
   default settings; ``service_process.py``) and a real ``celery worker --parallel-scheduler``
   with the plugin installed (``memory_1m_app.py``: its bootstep runs a scheduler inside the
   worker too) start on the empty store; after ``--warmup-passes`` scheduler passes, the RSS of
   both is read (psutil; the largest reading over ``--window`` seconds, worker = main process +
   pool children);
2. ``--jobs`` jobs due 1 to 31 days ahead are stored through ``Client.schedule_many`` in calls of
   ``--chunk`` by ``--callers`` threads (ids and payloads from ``--seed``), then ``--probes`` jobs
   due a few seconds ahead, which the schedulers must release and the worker run while the
   million wait;
3. after ``--passes`` more scheduler passes that held the lock, the RSS of both is read again
   (peaks sampled throughout);
4. the oracles, before any figure: every job stored; storage holds exactly ``--jobs`` Scheduled
   and ``--probes`` Enqueued; every probe ran once (lost 0, duplicated 0); no waiting job ran
   (unexpected 0); the broker queue is empty; the worker is alive;
5. the prefix, queue and result list are removed.

Then plain Celery (``worker_memory.py``'s scenario, reused): ``--plain-celery-jobs`` calls with
``countdown=3600`` to a plain worker, which holds every one in memory; its growth per call times
1,000,000 is the **extrapolated** size of a plain worker holding the million (not measured:
that would need ~8 GiB and a very long run). ``--plain-celery-jobs 0`` skips it.

    .venv/bin/python benchmarks/memory_1m.py --out memory-1m.json

``--out`` is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis
from burst import Scheduling, environment, executions, oracles, plan_jobs
from burst_systems import (
    BurstConfig,
    PlannedJob,
    RunContext,
    delete_celery_queue,
    ready_count,
    start_process,
    stop_process,
    wait_until,
    worker_environment,
)
from service_process import ServiceConfig, ServiceProcess
from worker_memory import MIB, PeakSampler, queue_length, run_scenario, settled_rss

import storage_adapters
from parallel_scheduler import Client, JobSpec, Settings

CELERY_TASK = "bench.burst.record"
DAY = 86400.0
TARGET_SCHEDULER_BYTES = 150 * 1000 * 1000  # the 150 MB
MILLION = 1_000_000
DEFAULT_STORAGES = ("postgresql://postgres@127.0.0.1:5432/test", "redis://127.0.0.1:6379/5")


@dataclass
class MemoryContext(RunContext):
    """The burst harness's per-run names, under this benchmark's own."""

    def __post_init__(self) -> None:
        self.queue = f"ps-bench-m1m-{self.run_id}"
        self.prefix = f"psbenchm1m{self.run_id}"
        self.results_key = f"ps-bench-m1m:{self.run_id}:executed"


# -- storing the jobs --------------------------------------------------------------------------


def specs(jobs: list[PlannedJob], first_index: int, queue: str) -> list[JobSpec]:
    return [
        JobSpec(
            CELERY_TASK,
            [first_index + job.index, job.token],
            id=job.id,
            eta=job.due_at,
            options={"queue": queue},
        )
        for job in jobs
    ]


def store_waiting(client: Client, ns: argparse.Namespace, queue: str) -> Scheduling:
    """``--jobs`` jobs due from 1 day to 31 days ahead, spread evenly; each call's ids and
    payloads come from the seed and the call's number, so every run stores the same jobs."""
    result = Scheduling()
    start = client.storage.now() + DAY
    span = 30 * DAY
    calls = range(0, ns.jobs, ns.chunk)

    def one_call(first: int) -> int:
        size = min(ns.chunk, ns.jobs - first)
        jobs = plan_jobs(
            ns.seed,
            f"waiting{first}",
            size,
            start + span * first / ns.jobs,
            span * size / ns.jobs,
            ns.payload_bytes,
        )
        began = time.perf_counter()
        created = sum(r.created for r in client.schedule_many(specs(jobs, first, queue)))
        result.latencies.append(time.perf_counter() - began)
        return created

    result.started = time.time()
    with ThreadPoolExecutor(ns.callers, thread_name_prefix="m1m-caller") as pool:
        for n, created in enumerate(pool.map(one_call, calls), start=1):
            result.created += created
            if n % max(1, len(calls) // 10) == 0:
                print(f"memory_1m: stored {result.created:,} of {ns.jobs:,}", flush=True)
    result.ended = time.time()
    return result


# -- one storage -------------------------------------------------------------------------------


def start_plugin_worker(ctx: RunContext, cfg: BurstConfig) -> subprocess.Popen[bytes]:
    """``celery -A memory_1m_app worker --parallel-scheduler``, one pool child."""
    env = worker_environment(ctx, cfg, MEM1M_STORAGE_URL=cfg.storage_url, MEM1M_PREFIX=ctx.prefix)
    command = [
        sys.executable, "-m", "celery", "-A", "memory_1m_app", "worker", "--pool=prefork",
        "--concurrency=1", "-Q", ctx.queue, "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--loglevel=WARNING", f"--hostname=m1m-{ctx.run_id}@%h",
        "--parallel-scheduler",
    ]  # fmt: skip
    worker = start_process(command, env, ctx.folder / "worker.log")
    wait_until(
        lambda: ready_count(ctx.folder) >= 1, "the plugin worker becoming ready", 120, [worker]
    )
    return worker


def storage_footprint(url: str, prefix: str) -> dict[str, Any]:
    """PostgreSQL: the jobs table with its indexes; Redis: the whole server's ``used_memory``
    (a shared server: indicative only)."""
    if url.startswith("postgres"):
        import psycopg

        with psycopg.connect(url.replace("+psycopg", "")) as conn:
            row = conn.execute("SELECT pg_total_relation_size(%s)", (f"{prefix}_jobs",)).fetchone()
        return {
            "postgresql_jobs_table_and_indexes_mib": round(int(row[0]) / MIB, 1) if row else None
        }
    info = redis.Redis.from_url(url).info("memory")
    return {"redis_server_used_memory_mib": round(int(info["used_memory"]) / MIB, 1)}


def storage_config(ns: argparse.Namespace, url: str) -> BurstConfig:
    """The burst harness's configuration, for its worker helpers: default settings throughout."""
    defaults = Settings()
    return BurstConfig(
        storage_url=url,
        broker_url=ns.broker_url,
        results_url=ns.broker_url,
        release_mode=defaults.release_mode,
        parallelism=defaults.max_degree_of_parallelism,
        batch_size=defaults.batch_size,
        poll_interval=defaults.poll_interval,
        dispatcher="send_task",
        workers=1,
        caller_pool=ns.callers,
    )


def run_storage(ns: argparse.Namespace, url: str) -> dict[str, Any]:
    cfg = storage_config(ns, url)
    results = redis.Redis.from_url(ns.broker_url)
    with tempfile.TemporaryDirectory(prefix="ps-m1m-") as tmp:
        ctx = MemoryContext(uuid.uuid4().hex[:10], Path(tmp))
        storage = storage_adapters.from_url(url, prefix=ctx.prefix, pool_size=ns.callers)
        client = Client(storage=storage, settings=Settings(storage_url=url, prefix=ctx.prefix))
        client.setup()
        service = ServiceProcess(
            ServiceConfig(url, ctx.prefix, ns.broker_url, ctx.queue), ctx.folder
        )
        worker: subprocess.Popen[bytes] | None = None
        try:
            service.start()
            worker = start_plugin_worker(ctx, cfg)
            return measure(ns, url, ctx, client, service, worker, results)
        finally:
            service.stop()
            if worker is not None:
                stop_process(worker)
            print("memory_1m: removing the stored jobs", flush=True)
            storage.drop()
            client.close()
            storage.close()
            delete_celery_queue(ns.broker_url, ctx.queue)
            results.delete(ctx.results_key)


def measure(
    ns: argparse.Namespace,
    url: str,
    ctx: RunContext,
    client: Client,
    service: ServiceProcess,
    worker: subprocess.Popen[bytes],
    results: redis.Redis,
) -> dict[str, Any]:
    service.wait_passes(ns.warmup_passes, ns.timeout)
    before = {
        "scheduler": settled_rss(service.pid, ns.window),
        "worker": settled_rss(worker.pid, ns.window),
    }
    footprint_before = storage_footprint(url, ctx.prefix)
    print(
        f"memory_1m: {url.split(':', 1)[0]}: after {ns.warmup_passes} warm-up passes, scheduler "
        f"{before['scheduler'] / MIB:.1f} MiB, worker {before['worker'] / MIB:.1f} MiB; storing "
        f"{ns.jobs:,} waiting jobs",
        flush=True,
    )
    with PeakSampler(service.pid) as scheduler_peak, PeakSampler(worker.pid) as worker_peak:
        stored = store_waiting(client, ns, ctx.queue)
        loaded_at = time.time()
        print(f"memory_1m: stored in {stored.ended - stored.started:.0f} s; probes", flush=True)
        probes = plan_jobs(ns.seed, "probes", ns.probes, client.storage.now() + 3.0, 2.0, 16)
        probing = Scheduling(started=time.time())
        probing.created = sum(r.created for r in client.schedule_many(specs(probes, -1, ctx.queue)))
        wait_until(
            lambda: results.llen(ctx.results_key) >= ns.probes,
            "the probes running",
            ns.timeout,
            [worker],
        )
        print(f"memory_1m: probes ran; waiting for {ns.passes} scheduler passes", flush=True)
        service.wait_passes(ns.passes, ns.timeout)
        after = {
            "scheduler": settled_rss(service.pid, ns.window),
            "worker": settled_rss(worker.pid, ns.window),
        }
    time.sleep(ns.settle)  # a late duplicate would land now
    runs = executions(results, ctx.results_key)
    counts = client.counts()
    found = oracles(probes, probing, runs)
    found["not_stored"] = ns.jobs - stored.created
    found["scheduled_not_jobs"] = abs(counts.get("scheduled", 0) - ns.jobs)
    found["enqueued_not_probes"] = abs(counts.get("enqueued", 0) - ns.probes)
    found["other_states"] = sum(n for s, n in counts.items() if s not in ("scheduled", "enqueued"))
    found["left_in_broker_queue"] = queue_length(ns.broker_url, ctx.queue)
    found["worker_died"] = int(worker.poll() is not None)
    record: dict[str, Any] = {"storage_url": url, "oracles": found, "counts": counts}
    if any(found.values()):
        return record  # the oracles come first: no figure of a failed run
    log = service.stop()
    loaded = [p for p in log.passes if p[2] and p[0] >= loaded_at]
    # passes that found nothing due: the steady state with the million waiting (the passes that
    # released probes are longer, by the probes' sends)
    durations = sorted(p[1] * 1000 for p in loaded if p[3] == 0)
    record["figures"] = {
        "jobs_waiting": ns.jobs,
        "store_jobs_per_s": round(stored.created / (stored.ended - stored.started)),
        "store_seconds": round(stored.ended - stored.started, 1),
        "scheduler_rss_mib": {
            "after_warmup_empty_store": round(before["scheduler"] / MIB, 1),
            "after_passes_with_jobs_waiting": round(after["scheduler"] / MIB, 1),
            "peak": round(max(scheduler_peak.peak, after["scheduler"]) / MIB, 1),
            "growth": round((after["scheduler"] - before["scheduler"]) / MIB, 1),
        },
        "scheduler_target_met": after["scheduler"] <= TARGET_SCHEDULER_BYTES,
        "worker_rss_mib": {
            "after_warmup_empty_store": round(before["worker"] / MIB, 1),
            "after_passes_with_jobs_waiting": round(after["worker"] / MIB, 1),
            "peak": round(max(worker_peak.peak, after["worker"]) / MIB, 1),
            "growth": round((after["worker"] - before["worker"]) / MIB, 1),
        },
        "passes_with_jobs_waiting": len(loaded),
        "pass_ms_nothing_due_with_jobs_waiting": {
            "p50": round(durations[len(durations) // 2], 2) if durations else None,
            "max": round(durations[-1], 2) if durations else None,
        },
        "storage_footprint_before": footprint_before,
        "storage_footprint_after": storage_footprint(url, ctx.prefix),
        "settings": log.settings,
    }
    return record


# -- plain Celery ------------------------------------------------------------------------------


def run_plain(ns: argparse.Namespace) -> dict[str, Any]:
    """``worker_memory.py``'s plain-Celery scenario at ``--plain-celery-jobs``, extrapolated."""
    wm = argparse.Namespace(
        jobs=ns.plain_celery_jobs,
        broker=ns.broker_url,
        storage_url=None,
        concurrency=1,
        window=ns.window,
        timeout=ns.timeout,
    )
    result = run_scenario(wm, plugin=False)
    found = {
        "not_received_by_worker": ns.plain_celery_jobs - result.worker_received,
        "left_in_broker_queue": result.broker_queue_after,
        "not_settled": int(result.settle_seconds is None),
    }
    record: dict[str, Any] = {"oracles": found}
    if any(found.values()):
        return record
    per_job = result.growth_bytes_per_job  # from the exact byte counts
    record["figures"] = {
        **asdict(result),
        "extrapolated_rss_mib_at_1m": round(result.rss_before_mib + per_job * MILLION / MIB, 1),
        "extrapolated_growth_gib_at_1m": round(per_job * MILLION / 2**30, 2),
    }
    return record


# -- reporting ---------------------------------------------------------------------------------


def summary(document: dict[str, Any]) -> str:
    o = document["options"]
    lines = [
        f"Memory with {o['jobs']:,} delayed jobs waiting (due 1-31 days ahead); scheduler process: "
        f"SchedulerService (default settings) via the Celery integration; worker: celery worker "
        f"--parallel-scheduler, 1 prefork child; RSS = largest reading over {o['window']:g} s "
        f"(psutil, worker = main + child); after {o['warmup_passes']} warm-up passes on the empty "
        f"store, and after {o['passes']} passes with the jobs waiting ({o['probes']:,} probe jobs "
        f"released and run in between).",
        "",
        "| storage | process | empty store, MiB | jobs waiting, MiB | growth | peak | target |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for run in document["storages"]:
        f = run["figures"]
        scheme = run["storage_url"].split(":", 1)[0]
        target = "<= 150 MB: " + ("met" if f["scheduler_target_met"] else "MISSED")
        for name, key, note in (
            ("scheduler process", "scheduler_rss_mib", target),
            ("worker with the plugin (--parallel-scheduler)", "worker_rss_mib", "-"),
        ):
            m = f[key]
            lines.append(
                f"| {scheme} | {name} | {m['after_warmup_empty_store']} | "
                f"{m['after_passes_with_jobs_waiting']} | {m['growth']:+} | {m['peak']} | {note} |"
            )
    lines += ["", "| storage | stored jobs/s | pass ms, nothing due (p50 / max) | footprint |"]
    lines += ["|---|--:|--:|---|"]
    for run in document["storages"]:
        f = run["figures"]
        passes = f["pass_ms_nothing_due_with_jobs_waiting"]
        lines.append(
            f"| {run['storage_url'].split(':', 1)[0]} | {f['store_jobs_per_s']:,} | "
            f"{passes['p50']} / {passes['max']} | {json.dumps(f['storage_footprint_after'])} |"
        )
    plain = document.get("plain_celery")
    if plain is not None:
        p = plain["figures"]
        lines += [
            "",
            "| plain Celery worker (countdown=3600) | calls | RSS before, MiB | after, MiB "
            "| growth per call | at 1,000,000 calls |",
            "|---|--:|--:|--:|--:|--:|",
            f"| measured | {p['jobs']:,} | {p['rss_before_mib']} | {p['rss_after_mib']} | "
            f"{p['growth_bytes_per_job']:,.0f} B | **extrapolated** (linear): "
            f"{p['extrapolated_rss_mib_at_1m']:,.0f} MiB (+{p['extrapolated_growth_gib_at_1m']} "
            "GiB) |",
        ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--storage-url",
        action="append",
        help=f"repeatable; default: {' and '.join(DEFAULT_STORAGES)}",
    )
    p.add_argument(
        "--broker-url",
        default="redis://127.0.0.1:6379/5",
        help="a Redis broker; only this run's queues and keys are created and removed",
    )
    p.add_argument("--jobs", type=int, default=MILLION, help="waiting jobs stored")
    p.add_argument("--chunk", type=int, default=2000, help="jobs per schedule_many call")
    p.add_argument("--callers", type=int, default=4, help="threads storing them")
    p.add_argument("--probes", type=int, default=1000, help="due jobs released while they wait")
    p.add_argument("--warmup-passes", type=int, default=5)
    p.add_argument("--passes", type=int, default=30, help="scheduler passes with the jobs waiting")
    p.add_argument("--plain-celery-jobs", type=int, default=100_000, help="0 skips plain Celery")
    p.add_argument("--payload-bytes", type=int, default=64, help="size of each job's token")
    p.add_argument("--window", type=float, default=2.0, help="seconds per RSS reading")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per wait")
    p.add_argument("--settle", type=float, default=2.0, help="seconds to wait for duplicates")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--out", type=Path, help="JSON results (never overwritten)")
    ns = p.parse_args(argv)
    ns.storage_url = ns.storage_url or list(DEFAULT_STORAGES)
    if ns.out is not None and ns.out.exists():
        p.error(f"{ns.out} exists; the benchmark never overwrites results")
    if min(ns.jobs, ns.chunk, ns.callers, ns.probes, ns.passes) < 1 or ns.plain_celery_jobs < 0:
        p.error("--jobs, --chunk, --callers, --probes, --passes must be >= 1")
    if not ns.broker_url.startswith(("redis://", "rediss://", "unix://")):
        p.error("--broker-url must be a Redis URL")
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    env = environment(storage_config(ns, ns.storage_url[0]))  # reads the Redis it reports
    storages = [run_storage(ns, url) for url in ns.storage_url]
    plain = run_plain(ns) if ns.plain_celery_jobs else None
    failed = [r for r in [*storages, plain] if r is not None and any(r["oracles"].values())]
    document: dict[str, Any] = {
        "benchmark": "memory_1m",
        "passed": not failed,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ns).items()},
        "environment": {**env, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "target": "scheduler process RSS <= 150 MB with 1,000,000 jobs waiting",
        "storages": storages,
        "plain_celery": plain,
    }
    if failed:
        for r in failed:
            found = {k: v for k, v in r["oracles"].items() if v}
            print(
                f"memory_1m: FAILED {r.get('storage_url', 'plain Celery')}: {found}",
                file=sys.stderr,
            )
    else:
        print()
        print(summary(document))
    if ns.out is not None:
        with ns.out.open("x") as out:  # "x": never replace a result someone kept
            json.dump(document, out, indent=2)
            out.write("\n")
        print(f"\nwrote {ns.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
