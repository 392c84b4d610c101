"""The memory scenario's worker part (``python -m benchmarks.memory --part worker``): a real
``celery worker`` gets ``countdown=3600`` calls, held in its memory (plain Celery) or stored by
the plugin; its RSS is read before and after it settled, and each run is checked before any
figure is kept (``run_worker_part``)."""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.brokers import delete_celery_queue, queue_length
from benchmarks.harness.celery_apps import ETA_THRESHOLD, NOOP_TASK, build_celery_app, read_stats
from benchmarks.harness.measure import MIB, PeakSampler, settled_rss
from devtools.processes import clean_environment, start_process, stop_process
from devtools.waiting import seconds_until_or_none

__all__ = ["COUNTDOWN", "MILLION", "SCENARIOS", "Result", "run_scenario", "run_worker_part"]

MILLION = 1_000_000

COUNTDOWN = 3600
#: ``--worker-scenarios``: the worker without the plugin, then with it.
SCENARIOS = ("plain", "plugin")


@dataclass
class Result:
    scenario: str
    jobs: int
    rss_before_mib: float
    rss_after_mib: float
    rss_peak_mib: float
    growth_mib: float
    growth_bytes_per_job: float
    schedule_seconds: float
    calls_per_second: float
    settle_seconds: float | None  # None: not settled within --timeout; "after" is at the timeout
    worker_received: int
    stored: int
    broker_queue_after: int


@contextlib.contextmanager
def running_worker(
    env: dict[str, str], plugin: bool, concurrency: int, folder: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``celery worker`` for the benchmark app, ended by its pid however the run ends."""
    command = [
        sys.executable, "-m", "celery", "-A", "benchmarks.harness.celery_apps", "worker",
        "-Q", env["BENCH_QUEUE"], "-c", str(concurrency), "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--loglevel=WARNING", f"--hostname=wm-{env['BENCH_QUEUE']}@%h",
        *(["--parallel-scheduler"] if plugin else []),
    ]  # fmt: skip
    process = start_process(command, env, folder / "worker.log")
    try:
        yield process
    finally:
        # A warm shutdown hands every prefetched message back to the broker first.
        stop_process(process, timeout=300)


def run_scenario(ns: argparse.Namespace, plugin: bool) -> Result:
    name = "with parallel-scheduler" if plugin else "plain Celery"
    run = uuid.uuid4().hex[:10]
    queue, prefix = f"ps-bench-memory-{run}", f"psbenchmem{run}"
    storage_url = ns.storage_url if plugin else None
    with tempfile.TemporaryDirectory(prefix="ps-memory-worker-") as tmp:
        folder = Path(tmp)
        stats = folder / "stats.json"
        env = clean_environment(
            BENCH_BROKER_URL=ns.broker,
            BENCH_QUEUE=queue,
            BENCH_TASK="noop",
            BENCH_ISOLATED="0",
            BENCH_APP_NAME="memory_worker",
            BENCH_STORAGE_URL=storage_url or "",
            BENCH_PREFIX=prefix if plugin else "",
            BENCH_STATS_FILE=str(stats),
        )
        caller = build_celery_app(
            ns.broker, queue, task="noop", isolated=False, storage_url=storage_url,
            prefix=prefix, name="memory_worker",
        )  # fmt: skip
        task = caller.tasks[NOOP_TASK]
        try:
            with running_worker(env, plugin, ns.concurrency, folder) as worker:

                def worker_up() -> bool:
                    if worker.poll() is not None:
                        log = (folder / "worker.log").read_text(errors="replace")
                        raise SystemExit(f"memory: the {name} worker exited:\n{log}")
                    return bool(read_stats(stats).get("ready"))

                becoming_ready = f"the {name} worker becoming ready"
                if seconds_until_or_none(worker_up, becoming_ready, timeout=120) is None:
                    raise SystemExit(f"memory: the {name} worker did not start")
                before = settled_rss(worker.pid, ns.window)
                print(f"{name}: worker ready, RSS {before / MIB:.1f} MiB; scheduling {ns.jobs:,}")
                with PeakSampler(worker.pid) as sampler:
                    start = time.perf_counter()
                    for i in range(ns.jobs):
                        task.apply_async((i,), countdown=COUNTDOWN)
                    schedule_seconds = time.perf_counter() - start
                    print(f"{name}: {ns.jobs:,} calls in {schedule_seconds:.1f} s; settling")
                    settle_seconds, stored = _settle(ns, name, caller, plugin, queue, stats)
                    after = settled_rss(worker.pid, ns.window)
                received = int(read_stats(stats).get("received", 0))
                waiting = queue_length(ns.broker, queue)
        finally:
            _clean_up(ns, caller, plugin, queue, prefix)
    growth = after - before
    return Result(
        scenario=name,
        jobs=ns.jobs,
        rss_before_mib=round(before / MIB, 1),
        rss_after_mib=round(after / MIB, 1),
        rss_peak_mib=round(max(sampler.peak, after) / MIB, 1),
        growth_mib=round(growth / MIB, 1),
        growth_bytes_per_job=round(growth / ns.jobs, 1),
        schedule_seconds=round(schedule_seconds, 2),
        calls_per_second=round(ns.jobs / schedule_seconds),
        settle_seconds=None if settle_seconds is None else round(settle_seconds, 2),
        worker_received=received,
        stored=stored,
        broker_queue_after=waiting,
    )


def _settle(
    ns: argparse.Namespace, name: str, caller: Any, plugin: bool, queue: str, stats: Path
) -> tuple[float | None, int]:
    """Wait until every call is where it will wait: (seconds it took, calls in storage)."""
    if not plugin:
        # Every message consumed by the worker, none left in the broker.
        seconds = seconds_until_or_none(
            lambda: (
                int(read_stats(stats).get("received", 0)) >= ns.jobs
                and queue_length(ns.broker, queue) == 0
            ),
            f"the {name} worker receiving all {ns.jobs:,} calls",
            timeout=ns.timeout,
        )
        return seconds, 0
    client = caller.parallel_scheduler.client
    seconds = seconds_until_or_none(
        lambda: client.counts().get("scheduled", 0) >= ns.jobs,
        f"storage holding all {ns.jobs:,} calls",
        timeout=ns.timeout,
    )
    return seconds, int(client.counts().get("scheduled", 0))


def _clean_up(ns: argparse.Namespace, caller: Any, plugin: bool, queue: str, prefix: str) -> None:
    delete_celery_queue(ns.broker, queue)
    if plugin:
        import storage_adapters

        caller.parallel_scheduler.client.close()
        storage = storage_adapters.from_url(ns.storage_url, prefix=prefix)
        try:
            storage.drop()
        finally:
            storage.close()
    caller.close()


def run_worker_part(ns: argparse.Namespace) -> dict[str, Any]:
    """``--calls`` delayed calls to a plain worker and to one with the plugin (each of
    ``--worker-scenarios``), each checked: every call where it waits (received by the plain
    worker, stored by the plugin), the broker queue empty, settled within ``--timeout``. Only a
    run that passed gets figures; the plain one also its growth per call times 1,000,000, the
    **extrapolated** size of a plain worker holding a million (not measured: ~8 GiB)."""
    from storage_adapters import mask_url

    calls = argparse.Namespace(
        jobs=ns.calls,
        broker=ns.broker_url,
        storage_url=ns.worker_storage_url,
        concurrency=ns.worker_concurrency,
        window=ns.window,
        timeout=ns.timeout,
    )
    runs = []
    for scenario in ns.worker_scenarios:
        plugin = scenario == "plugin"
        result = run_scenario(calls, plugin)
        found = {
            "not_settled": int(result.settle_seconds is None),
            "left_in_broker_queue": result.broker_queue_after,
        }
        if plugin:
            found["not_stored"] = ns.calls - result.stored
        else:
            found["not_received_by_worker"] = ns.calls - result.worker_received
        record: dict[str, Any] = {"scenario": scenario, "oracles": found}
        if not any(found.values()):
            record["figures"] = asdict(result)
            if not plugin:
                per_call = result.growth_bytes_per_job  # from the exact byte counts
                record["figures"] |= {
                    "extrapolated_rss_mib_at_1m": round(
                        result.rss_before_mib + per_call * MILLION / MIB, 1
                    ),
                    "extrapolated_growth_gib_at_1m": round(per_call * MILLION / 2**30, 2),
                }
        runs.append(record)
    return {
        "broker": mask_url(ns.broker_url),
        "storage_url": mask_url(ns.worker_storage_url),
        "countdown_seconds": COUNTDOWN,
        "eta_threshold_seconds": ETA_THRESHOLD,
        "worker_concurrency": ns.worker_concurrency,
        "runs": runs,
    }
