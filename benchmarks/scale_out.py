"""Scale-out: release throughput with 1, 2 and 4 scheduler processes sharing one store split into
shards, on a Redis Cluster and on PostgreSQL, with the CPU each process and each storage node
spends per 1,000 jobs, so the figure for more machines can be projected.

    .venv/bin/python -m benchmarks.scale_out --out scale_out.jsonl
    .venv/bin/python -m benchmarks.scale_out --storages postgresql --processes 1 2 --pg-jobs 20000

Each run: N jobs due now are preloaded into a fresh prefix split into ``--shards`` shards (not
timed with the release), P processes each running the product's ``SchedulerService`` with those
shards (devtools/scheduler_process.py) load and connect, then start together; the run is timed
from the start signal to the latest hand-off in any process, and checked before its figure is
kept: every id dispatched exactly once across the processes, nothing left Scheduled or Claimed,
all N Enqueued. A failed check is reported and the command exits 1.

The dispatcher is a counting one (each id appended to a list in memory): no broker, so the
figures are the schedulers' and the storage's alone; a real broker adds its own cost per job
(see release_throughput.py for the publish paths).

Measured (harness/scale_out_runs.py): jobs/s; each scheduler process's CPU seconds (psutil)
per 1,000 jobs it was given to release, and the total; each storage node's CPU seconds per
1,000 jobs: on the Redis Cluster each master's ``redis-server`` (found by its listening port),
on PostgreSQL the server's whole process tree (postmaster, background processes and every
backend: anything else using that server counts too, so use a quiet one); on Redis the
``used_memory`` the masters gained from the preload, scaled to MiB per 1,000,000 jobs.

Projection model: a scheduler process releases at about r1 jobs/s (the measured rate with P=1)
and the processes share the work through the shards, so until the storage saturates the
throughput grows with the number of processes (one per machine):

    throughput(N machines) ~= min(N x r1, storage limit)

The storage limit is where its busiest node runs out of CPU: a Redis master is single-threaded,
so about 1,000 / (that master's CPU seconds per 1,000 jobs) jobs/s, times the masters when the
shards spread evenly over them (more masters and more shards raise it); a PostgreSQL server
has ``--pg-cores`` cores, so about cores x 1,000 / (its CPU seconds per 1,000 jobs). The
printed projection uses the P=1 rate and the storage CPU measured with the most processes. It is
a model: lock contention, network round trips between machines and a shard count below the
process count (a process with no shard does nothing) are not in it.

Figures go to stdout as a table, and ``--out`` appends one JSON record (never overwriting
earlier ones) with the commit, load average, command and parameters.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.harness.release_runs import CheckFailed
from benchmarks.harness.report import append_record, environment, load_average, options
from benchmarks.harness.report.provenance import provenance_line
from benchmarks.harness.scale_out_runs import RunConfig, release_run
from devtools import redis_cluster

KINDS = ("redis-cluster", "postgresql")
#: machines the projection is printed for
PROJECTED = (1, 2, 4, 8, 16)


def _url(kind: str, args: argparse.Namespace) -> str:
    return str(args.redis_cluster_url if kind == "redis-cluster" else args.postgresql_url)


def projection(runs: list[dict[str, Any]], kind: str, cores: int) -> dict[str, Any] | None:
    """The model's inputs and its figure for ``PROJECTED`` machines (module docstring)."""
    mine = [r for r in runs if r["storage"] == kind]
    single = [r for r in mine if r["processes"] == 1]
    if not single or not mine:
        return None
    widest = max(mine, key=lambda r: r["processes"])
    per_node = widest["storage_cpu_s_per_1000"]
    if not per_node or max(per_node.values()) <= 0:
        return None
    busiest = max(per_node.values())
    if kind == "redis-cluster":
        limit = len(per_node) * 1000 / busiest
        basis = f"{len(per_node)} masters x 1,000 / {busiest:.3f} s (busiest master)"
    else:
        limit = cores * 1000 / busiest
        basis = f"{cores} cores x 1,000 / {busiest:.3f} s (server tree)"
    r1 = single[0]["jobs_per_s"]
    return {
        "per_process_jobs_per_s": r1,
        "storage_limit_jobs_per_s": round(limit),
        "storage_limit_basis": basis,
        "machines": {n: round(min(n * r1, limit)) for n in PROJECTED},
    }


def table(document: dict[str, Any]) -> str:
    lines = [
        "| storage | processes | jobs | s | jobs/s | scheduler CPU s / 1,000 (each process) "
        "| storage CPU s / 1,000 (each node) | Redis MiB / 1M jobs |",
        "|---|--:|--:|--:|--:|---|---|--:|",
    ]
    for run in document["runs"]:
        each = ", ".join(
            f"{p['cpu_s'] / max(p['released'], 1) * 1000:.3f}" for p in run["per_process"]
        )
        nodes = ", ".join(f"{v:.3f}" for v in run["storage_cpu_s_per_1000"].values()) or "-"
        memory = run.get("redis_mib_per_million_jobs", "-")
        lines.append(
            f"| {run['storage']} | {run['processes']} | {run['jobs']:,} | {run['seconds']:.2f} "
            f"| {run['jobs_per_s']:,.0f} | {run['scheduler_cpu_s_per_1000']:.3f} ({each}) "
            f"| {nodes} | {memory} |"
        )
    for kind, model in document["projection"].items():
        if model is None:
            continue
        figures = ", ".join(f"{n}: {v:,}/s" for n, v in model["machines"].items())
        lines.append(
            f"\n{kind}: min(N x {model['per_process_jobs_per_s']:,.0f}/s, "
            f"{model['storage_limit_jobs_per_s']:,}/s = {model['storage_limit_basis']}) "
            f"-> machines {figures}"
        )
    lines.append(provenance_line(document))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storages", nargs="+", choices=KINDS, default=list(KINDS))
    p.add_argument("--processes", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--redis-jobs", type=int, default=200_000, help="jobs per Redis Cluster run")
    p.add_argument("--pg-jobs", type=int, default=100_000, help="jobs per PostgreSQL run")
    p.add_argument(
        "--redis-cluster-url",
        help="a local cluster (redis+cluster://host:port,...); default: a throwaway one from "
        "devtools/redis_cluster.py, stopped at the end",
    )
    p.add_argument("--postgresql-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    p.add_argument("--pg-cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--batch-size", type=int, help="default: the product's")
    p.add_argument("--parallelism", type=int, help="pool threads (default: the product's)")
    p.add_argument("--release-mode", choices=("batch", "per_job"), help="default: the product's")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--out", type=Path, help="JSON lines file: one record appended per command")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if min(*args.processes, args.shards, args.redis_jobs, args.pg_jobs) < 1:
        p.error("--processes, --shards, --redis-jobs and --pg-jobs must be >= 1")
    cluster = None
    if "redis-cluster" in args.storages and not args.redis_cluster_url:
        cluster = redis_cluster.start()
        args.redis_cluster_url = cluster.url
    document: dict[str, Any] = {
        "benchmark": "scale_out",
        "command": " ".join([sys.executable, *sys.argv]),
        "environment": environment(),
        "config": options(args),
        "runs": [],
        "failures": [],
    }
    settings = {
        "batch_size": args.batch_size,
        "parallelism": args.parallelism,
        "release_mode": args.release_mode,
    }
    try:
        with tempfile.TemporaryDirectory(prefix="scale-out-") as folder:
            for kind in args.storages:
                jobs = args.redis_jobs if kind == "redis-cluster" else args.pg_jobs
                for count in args.processes:
                    config = RunConfig(
                        _url(kind, args), kind, count, jobs, args.shards, args.seed,
                        Path(folder) / f"{kind}-{count}", args.timeout, settings,
                    )  # fmt: skip
                    print(f"{kind}: {count} process(es), {jobs:,} jobs ...", flush=True)
                    started = time.monotonic()
                    try:
                        run = release_run(config)
                    except (CheckFailed, RuntimeError) as exc:
                        traceback.print_exc(file=sys.stderr)
                        document["failures"].append(f"{kind} P={count}: {exc}")
                        continue
                    run["load_average_after"] = load_average()
                    run["wall_s"] = round(time.monotonic() - started, 1)
                    document["runs"].append(run)
                    rate, seconds = run["jobs_per_s"], run["seconds"]
                    print(f"  {rate:,.0f} jobs/s in {seconds:.2f} s", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    document["load_average_at_end"] = load_average()
    document["projection"] = {
        kind: projection(document["runs"], kind, args.pg_cores) for kind in args.storages
    }
    for failure in document["failures"]:
        print(f"scale_out: FAILED {failure}", file=sys.stderr)
    print()
    print(table(document))
    append_record(args.out, document)
    return 1 if document["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
