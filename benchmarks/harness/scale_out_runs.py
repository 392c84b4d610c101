"""The scale-out benchmark's runs: N due jobs preloaded into a sharded store, P scheduler
processes (``devtools.scheduler_process``: the product's ``SchedulerService`` handing every job to
a dispatcher that only counts, no broker) started together, timed until every job is released, and
checked: every id dispatched exactly once across the processes, nothing left Scheduled or
Claimed, all N Enqueued.

Measured per run: wall time (from the start signal to the latest hand-off in any process), CPU
seconds of each scheduler process (psutil, from just before the start signal to the end), CPU
seconds of each storage node (Redis Cluster: each master's ``redis-server`` process, found by its
listening port; PostgreSQL: the server's process tree, postmaster and every backend, found by
its port: the backends serving these processes and anything else on that server), and on Redis
the ``used_memory`` each master gained from the preload.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis

import storage_adapters
from benchmarks.harness.measure import ProcessGroup, cpu_between, server_pid
from benchmarks.harness.release_runs import CheckFailed, due_jobs, job_specs, run_prefix
from devtools.processes import clean_environment
from devtools.scheduler_process import SchedulerProcess
from devtools.waiting import seconds_until
from storage_adapters import JobState, Storage

__all__ = ["RunConfig", "StorageNodes", "release_run"]

#: jobs per add_jobs call while preloading (one statement or script per shard's part)
PAGE = 5000


@dataclass(frozen=True)
class RunConfig:
    storage_url: str
    kind: str  # "redis-cluster" or "postgresql"
    processes: int
    jobs: int
    shards: int
    seed: int
    workdir: Path
    timeout: float
    #: settings passed to every scheduler process (``None``: the product's default)
    settings: dict[str, Any] = field(default_factory=dict)


def cluster_masters(url: str) -> list[int]:
    """The ports of the cluster's masters on this machine, from ``CLUSTER NODES`` of the first
    node the URL names (local clusters only: their processes are measured by port)."""
    first = url.split("://", 1)[1].split(",")[0].split("@")[-1].split("/")[0].split("?")[0]
    host, port = first.rsplit(":", 1)
    with redis.Redis(host=host, port=int(port), decode_responses=True) as node:
        text = node.execute_command("CLUSTER", "NODES")  # as text: one line per node
    lines = text.splitlines() if isinstance(text, str) else []
    masters = []
    for line in lines:
        parts = line.split()
        flags = parts[2].split(",")
        if "master" in flags and "fail" not in flags and len(parts) > 8:  # serves slots
            masters.append(int(parts[1].split("@")[0].rsplit(":", 1)[1]))
    return sorted(masters)


class StorageNodes:
    """The storage's server processes, one ``ProcessGroup`` per node, and (Redis) memory."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind = kind
        self.groups: list[ProcessGroup] = []
        self.ports: list[int] = []
        if kind == "redis-cluster":
            self.ports = cluster_masters(url)
            for port in self.ports:
                pid = server_pid(f"redis://127.0.0.1:{port}")
                if pid is not None:
                    self.groups.append(ProcessGroup(f"redis master :{port}", [pid], False))
        else:
            pid = server_pid(url)
            if pid is not None:
                self.groups.append(ProcessGroup("postgresql server (process tree)", [pid]))

    def cpu(self) -> dict[str, dict[int, float]]:
        return {group.name: group.cpu() for group in self.groups}

    def used_memory(self) -> dict[str, int]:
        """``INFO memory`` ``used_memory`` of each master (Redis only)."""
        found = {}
        for port in self.ports:
            with redis.Redis(port=port) as node:
                found[f"redis master :{port}"] = int(node.info("memory")["used_memory"])
        return found


def _preload(store: Storage, config: RunConfig) -> float:
    """N jobs due a second ago, in pages; the seconds it took."""
    specs = job_specs(config.jobs, config.seed, "scale-out")
    began = time.monotonic()
    for first in range(0, len(specs), PAGE):
        store.add_jobs(due_jobs(store, specs[first : first + PAGE]))
    return time.monotonic() - began


def _start(config: RunConfig, prefix: str, number: int) -> SchedulerProcess:
    """Scheduler process ``p<number>``: loads and connects, then waits for the ``go`` file; it
    keeps its ids in memory (no syscall per job) and writes them when stopped."""
    return SchedulerProcess(
        config.workdir, f"p{number}", config.storage_url, [prefix], service=True,
        record=False, status=True, ids=True, env=clean_environment(),
        shards=config.shards, start_file=config.workdir / "go", retention="none",
        log_level="WARNING", **config.settings,
    )  # fmt: skip


def _process_cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _check(store: Storage, config: RunConfig, dispatched: Counter[str]) -> None:
    expected = {f"j{i}" for i in range(config.jobs)}
    if set(dispatched) != expected:
        missing, extra = len(expected - set(dispatched)), len(set(dispatched) - expected)
        raise CheckFailed(f"dispatched ids vs stored: {missing} missing, {extra} extra")
    twice = sum(n - 1 for n in dispatched.values())
    if twice:
        raise CheckFailed(f"{twice} dispatches beyond the first (no process failed)")
    states = store.count_by_state()
    left = states[JobState.SCHEDULED] + states[JobState.CLAIMED]
    if left or states[JobState.ENQUEUED] != config.jobs:
        raise CheckFailed(f"storage after the run: {dict(states)}")


def release_run(config: RunConfig) -> dict[str, Any]:
    """One checked run; its figures as a JSON-ready dict (``CheckFailed`` when the check fails)."""
    config.workdir.mkdir(parents=True, exist_ok=True)
    for stale in config.workdir.iterdir():
        stale.unlink()
    prefix = run_prefix("so")
    store = storage_adapters.from_url(
        config.storage_url, prefix=prefix, shards=config.shards, pool_size=4
    )
    store.setup()
    nodes = StorageNodes(config.kind, config.storage_url)
    children: list[SchedulerProcess] = []
    try:
        memory_before = nodes.used_memory()
        preload_s = _preload(store, config)
        memory_after = nodes.used_memory()
        children.extend(_start(config, prefix, number) for number in range(config.processes))
        loaded = [child.status_file for child in children]
        seconds_until(lambda: all(p.exists() for p in loaded), "processes loaded", 120, children)
        cpu_before = [_process_cpu(child.pid) for child in children]
        nodes_before = nodes.cpu()
        (config.workdir / "go").touch()
        go_at = time.time()

        def released() -> bool:
            return sum(child.status()["released"] for child in children) >= config.jobs

        seconds_until(released, "every job released", config.timeout, children)
        cpu_after = [_process_cpu(child.pid) for child in children]
        nodes_after = nodes.cpu()
        for child in children:
            child.stop()
        dispatched: Counter[str] = Counter()
        per_process = []
        for child, before, after in zip(children, cpu_before, cpu_after, strict=True):
            ids = child.dispatched_ids()
            dispatched.update(ids)
            per_process.append({"released": len(ids), "cpu_s": round(after - before, 3)})
        _check(store, config, dispatched)
        last_at = max(child.status()["last_at"] for child in children)
        seconds = last_at - go_at
        thousands = config.jobs / 1000
        nodes_cpu = {
            name: round(cpu_between(nodes_before[name], nodes_after[name]), 3)
            for name in nodes_before
        }
        run: dict[str, Any] = {
            "storage": config.kind,
            "processes": config.processes,
            "jobs": config.jobs,
            "shards": config.shards,
            "preload_s": round(preload_s, 2),
            "seconds": round(seconds, 3),
            "jobs_per_s": round(config.jobs / seconds, 1),
            "per_process": per_process,
            "scheduler_cpu_s_per_1000": round(sum(p["cpu_s"] for p in per_process) / thousands, 4),
            "storage_cpu_s": nodes_cpu,
            "storage_cpu_s_per_1000": {k: round(v / thousands, 4) for k, v in nodes_cpu.items()},
        }
        if memory_before:
            gained = {k: memory_after[k] - memory_before[k] for k in memory_before}
            run["redis_used_memory_gained"] = gained
            run["redis_mib_per_million_jobs"] = round(
                sum(gained.values()) / config.jobs * 1_000_000 / 2**20, 1
            )
        return run
    finally:
        for child in children:
            child.stop()
        with contextlib.suppress(storage_adapters.StorageError):
            store.drop()
        store.close()
