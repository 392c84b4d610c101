"""The memory scenario's workload: ``--jobs`` jobs due 1 to 31 days ahead, stored through the
public ``Client`` by concurrent callers, and how much room they take in storage."""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from benchmarks.harness.celery_apps import CELERY_TASK
from benchmarks.harness.measure import MIB
from benchmarks.harness.workloads import PlannedJob, Scheduling, plan_jobs
from parallel_scheduler import Client, JobSpec

__all__ = ["DAY", "specs", "storage_footprint", "store_waiting"]

DAY = 86400.0


def specs(jobs: list[PlannedJob], first_index: int, queue: str) -> list[JobSpec]:
    return [
        JobSpec(
            CELERY_TASK,
            args=[first_index + job.index, job.token],
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
                print(f"memory: stored {result.created:,} of {ns.jobs:,}", flush=True)
    result.ended = time.time()
    return result


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
