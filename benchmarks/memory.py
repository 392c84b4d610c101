"""Memory with many delayed jobs waiting, in two parts (``--part scheduler|worker|all``, default
all):

**scheduler**: 1,000,000 jobs waiting in storage, and the processes that serve them. For each
``--storage-url`` (PostgreSQL and Redis by default), with a storage prefix of its own:

1. a scheduler process (the product's ``SchedulerService`` built by the Celery integration,
   default settings; ``harness.service_process``) and a real ``celery worker --parallel-scheduler``
   with the plugin installed (``harness.celery_apps``: its bootstep runs a scheduler inside the
   worker too) start on the empty store; after ``--warmup-passes`` scheduler passes, the RSS of
   both is read (psutil; the largest reading over ``--window`` seconds, worker = main process +
   pool children);
2. ``--jobs`` jobs due 1 to 31 days ahead are stored through ``Client.schedule_many`` in calls of
   ``--chunk`` by ``--callers`` threads (ids and payloads from ``--seed``), then ``--probes`` jobs
   due a few seconds ahead, which the schedulers must release and the worker run while the
   million wait;
3. after ``--passes`` more scheduler passes (holding the lock, or idle: nothing due, one peek),
   the RSS of both is read again (peaks sampled throughout);
4. the oracles, before any figure: every job stored; storage holds exactly ``--jobs`` Scheduled
   and ``--probes`` Enqueued; every probe ran once (lost 0, duplicated 0); no waiting job ran
   (unexpected 0); the broker queue is empty; the worker is alive;
5. the prefix, queue and result list are removed.

**worker**: a Celery worker's own memory with ``--calls`` delayed calls (``apply_async(...,
countdown=3600)``; ``harness.delayed_calls``), one run per ``--worker-scenarios``:

* ``plain``: plain Celery. The worker receives every countdown call and holds it in memory until
  it is due (ETA tasks bypass the prefetch limit); settled once it received all of them and the
  broker queue is empty. Its growth per call times 1,000,000 is the **extrapolated** size of a
  plain worker holding a million (labelled as such: measuring it would take ~8 GiB);
* ``plugin``: the same calls with the plugin installed (``eta_threshold`` 60 s, storage
  ``--worker-storage-url``, the worker run with ``--parallel-scheduler``): the calls wait in
  storage; settled once storage holds all of them.

Each reports the worker's RSS (main process + pool children) before the calls and once settled
(each the largest of readings over ``--window`` s), the peak sampled during the run and the
caller's calls per second. A run that does not settle within ``--timeout`` fails its check (the
broker must be Redis: with RabbitMQ a plain worker raises its prefetch a message or two a second,
and would take hours to settle).

    .venv/bin/python -m benchmarks.memory --out memory-1m.json
    .venv/bin/python -m benchmarks.memory --part worker --calls 100000 --out worker-memory.json

``--out`` is never overwritten. Everything a run creates (queues, storage prefixes, worker and
scheduler processes) is removed at the end.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

import storage_adapters
from benchmarks.harness.brokers import delete_celery_queue, queue_length
from benchmarks.harness.celery_apps import ready_count
from benchmarks.harness.delayed_calls import MILLION, SCENARIOS, run_worker_part
from benchmarks.harness.measure import MIB, PeakSampler, settled_rss
from benchmarks.harness.options import add_broker, add_run_options, parse_checked
from benchmarks.harness.oracles import executions, oracles
from benchmarks.harness.report import conclude, environment, load_average, options
from benchmarks.harness.report.memory import summary
from benchmarks.harness.service_process import ServiceConfig, ServiceProcess
from benchmarks.harness.systems import BurstConfig, RunContext, scenario_environment
from benchmarks.harness.waiting_jobs import specs, storage_footprint, store_waiting
from benchmarks.harness.workloads import Scheduling, plan_jobs
from devtools.processes import start_process, stop_process
from devtools.waiting import seconds_until
from parallel_scheduler import Client, Settings

TARGET_SCHEDULER_BYTES = 150 * 1000 * 1000  # the 150 MB
DEFAULT_STORAGES = ("postgresql://postgres@127.0.0.1:5432/test", "redis://127.0.0.1:6379/5")
PARTS = ("scheduler", "worker", "all")


# -- one storage -------------------------------------------------------------------------------


def start_plugin_worker(ctx: RunContext, cfg: BurstConfig) -> subprocess.Popen[bytes]:
    """``celery -A benchmarks.harness.celery_apps worker --parallel-scheduler`` with the plugin
    installed, one pool child."""
    env = scenario_environment(ctx, cfg, BENCH_STORAGE_URL=cfg.storage_url, BENCH_PREFIX=ctx.prefix)
    command = [
        sys.executable, "-m", "celery", "-A", "benchmarks.harness.celery_apps", "worker",
        "--pool=prefork", "--concurrency=1", "-Q", ctx.queue, "--without-gossip",
        "--without-mingle", "--without-heartbeat", "--loglevel=WARNING",
        f"--hostname=m1m-{ctx.run_id}@%h", "--parallel-scheduler",
    ]  # fmt: skip
    worker = start_process(command, env, ctx.folder / "worker.log")
    seconds_until(
        lambda: ready_count(ctx.folder) >= 1, "the plugin worker becoming ready", 120, [worker]
    )
    return worker


def run_storage(ns: argparse.Namespace, url: str) -> dict[str, Any]:
    cfg = BurstConfig(url, ns.broker_url, ns.broker_url, caller_pool=ns.callers)
    results = redis.Redis.from_url(ns.broker_url)
    with tempfile.TemporaryDirectory(prefix="ps-m1m-") as tmp:
        ctx = RunContext(uuid.uuid4().hex[:10], Path(tmp), "m1m")
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
            print("memory: removing the stored jobs", flush=True)
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
        f"memory: {url.split(':', 1)[0]}: after {ns.warmup_passes} warm-up passes, scheduler "
        f"{before['scheduler'] / MIB:.1f} MiB, worker {before['worker'] / MIB:.1f} MiB; storing "
        f"{ns.jobs:,} waiting jobs",
        flush=True,
    )
    with PeakSampler(service.pid) as scheduler_peak, PeakSampler(worker.pid) as worker_peak:
        stored = store_waiting(client, ns, ctx.queue)
        loaded_at = time.time()
        print(f"memory: stored in {stored.ended - stored.started:.0f} s; probes", flush=True)
        probes = plan_jobs(ns.seed, "probes", ns.probes, client.storage.now() + 3.0, 2.0, 16)
        probing = Scheduling(started=time.time())
        probing.created = sum(r.created for r in client.schedule_many(specs(probes, -1, ctx.queue)))
        seconds_until(
            lambda: results.llen(ctx.results_key) >= ns.probes,
            "the probes running",
            ns.timeout,
            [worker],
        )
        print(f"memory: probes ran; waiting for {ns.passes} scheduler passes", flush=True)
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
    loaded = [p for p in log.passes if (p[2] or p[5]) and p[0] >= loaded_at]
    # passes that found nothing due (idle: one peek, no lock): the steady state with the million
    # waiting (the passes that released probes are longer, by the probes' sends)
    durations = sorted(p[1] * 1000 for p in loaded if p[5] or p[3] == 0)
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--part", choices=PARTS, default="all", help="which part runs (all)")
    add_broker(p)
    p.add_argument("--window", type=float, default=2.0, help="seconds per RSS reading")
    add_run_options(p, timeout=900.0, timeout_help="seconds per wait")
    scheduler = p.add_argument_group("scheduler part")
    scheduler.add_argument(
        "--storage-url",
        action="append",
        help=f"repeatable; default: {' and '.join(DEFAULT_STORAGES)}",
    )
    scheduler.add_argument("--jobs", type=int, default=MILLION, help="waiting jobs stored")
    scheduler.add_argument("--chunk", type=int, default=2000, help="jobs per schedule_many call")
    scheduler.add_argument("--callers", type=int, default=4, help="threads storing them")
    scheduler.add_argument(
        "--probes", type=int, default=1000, help="due jobs released while they wait"
    )
    scheduler.add_argument("--warmup-passes", type=int, default=5)
    scheduler.add_argument(
        "--passes", type=int, default=30, help="scheduler passes with the jobs waiting"
    )
    worker = p.add_argument_group("worker part")
    worker.add_argument("--calls", type=int, default=100_000, help="delayed calls per scenario")
    worker.add_argument("--worker-scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    worker.add_argument(
        "--worker-storage-url",
        default=DEFAULT_STORAGES[1],
        help="the plugin's storage (a prefix of its own, dropped afterwards)",
    )
    worker.add_argument("--worker-concurrency", type=int, default=1, help="worker pool size")
    ns = parse_checked(p, argv)
    ns.storage_url = ns.storage_url or list(DEFAULT_STORAGES)
    if min(ns.jobs, ns.chunk, ns.callers, ns.probes, ns.passes, ns.calls) < 1:
        p.error("--jobs, --chunk, --callers, --probes, --passes, --calls must be >= 1")
    if ns.worker_concurrency < 1:
        p.error("--worker-concurrency must be >= 1")
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    env = environment(ns.broker_url)  # reads the Redis it reports
    storages = [run_storage(ns, url) for url in ns.storage_url] if ns.part != "worker" else []
    worker = run_worker_part(ns) if ns.part != "scheduler" else None
    runs = [*storages, *(worker["runs"] if worker else [])]
    failed = [r for r in runs if any(r["oracles"].values())]
    document: dict[str, Any] = {
        "benchmark": "memory",
        "part": ns.part,
        "passed": not failed,
        "options": options(ns),
        "environment": {**env, "load_average_at_end": load_average()},
        "target": "scheduler process RSS <= 150 MB with 1,000,000 jobs waiting",
        "storages": storages,
        "worker_calls": worker,
    }
    found = [
        (r.get("storage_url") or f"worker part, {r['scenario']}",
         {k: v for k, v in r["oracles"].items() if v})
        for r in failed
    ]  # fmt: skip
    return conclude("memory", document, found, summary, ns.out)


if __name__ == "__main__":
    sys.exit(main())
