"""Dashboard pages with a big store: does every page render in under ``--budget-ms`` (300 ms)?

One run, on one storage server (``--storage-url``), under a fresh prefix (dropped at the end):

1. ``--jobs`` jobs are stored through ``add_jobs`` in batches: due times spread over a year,
   ten task names, five queues (in the payload's options); 1 % of them cancelled, and a few
   hundred given a ``last_error`` by a failed release (claim, unclaim with an error), so the
   errors page has something to find;
2. each page is fetched through Flask's test client (the whole app: auth off, routing,
   storage reads, templates), once to warm up and then ``--repeat`` times: the overview, the
   jobs list (default, any state, by task, by queue: the bounded scan, a page deep in the
   keyset order), a job's detail, the recurring and errors pages, the bulk-cancel preview.

The verdict (``over_budget``): every page's p99 within ``--budget-ms``. ``--out`` (JSON) is
never overwritten. The full size is 1,000,000 jobs, on PostgreSQL and on Redis; the same fill,
pages and verdict run at a small size as a slow test (``tests/dashboard/test_page_budget.py``).
Smoke-run it small:

    .venv/bin/python -m benchmarks.dashboard_pages \
        --storage-url redis://127.0.0.1:6379/0 --jobs 1000
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import storage_adapters
from benchmarks.harness.report import (
    conclude,
    environment,
    load_average,
    ms_summary,
    options,
    refuse_existing,
)
from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from storage_adapters import NewJob, Storage

TASKS = [f"bench.t{i}" for i in range(10)]
QUEUES = [f"q{i}" for i in range(5)]
YEAR = 365 * 86400.0
BUDGET_MS = 300.0  # each page's p99: the README's "Web dashboard" budget


def fill(storage: Storage, jobs: int, batch: int) -> dict[str, Any]:
    """Store ``jobs`` jobs; returns what the pages will be asked about."""
    now = storage.now()
    started = time.monotonic()
    for first in range(0, jobs, batch):
        storage.add_jobs(
            [
                NewJob(
                    f"job-{i:08d}",
                    TASKS[i % len(TASKS)],
                    json.dumps({"args": [i], "kwargs": {}, "options": {"queue": QUEUES[i % 5]}}),
                    now + 60 + YEAR * i / jobs,
                )
                for i in range(first, min(first + batch, jobs))
            ]
        )
    for i in range(0, jobs, 100):
        storage.cancel(f"job-{i:08d}")
    lock = storage.acquire_lock("bench-dashboard", "bench", 60)
    assert lock is not None
    failed = [f"job-{i:08d}" for i in range(1, min(jobs, 300 * 97), 97)]
    claims = [c for c in (storage.claim(j, lock, 60) for j in failed) if c is not None]
    storage.unclaim(claims, "bench: broker unreachable")
    middle = storage.get_job(f"job-{jobs // 2:08d}")
    assert middle is not None
    return {
        "fill_seconds": round(time.monotonic() - started, 1),
        "middle": middle,
        "detail_id": f"job-{jobs // 3:08d}",
    }


def pages(facts: dict[str, Any]) -> dict[str, str]:
    middle = facts["middle"]
    return {
        "overview": "/",
        "jobs": "/jobs",
        "jobs_any_state": "/jobs?state=any",
        "jobs_by_task": "/jobs?task=bench.t3",
        "jobs_by_queue_scan": "/jobs?queue=q2",
        "jobs_deep_page": f"/jobs?after={middle.due_at!r}:{middle.id}",
        "job_detail": f"/jobs/detail?id={facts['detail_id']}",
        "recurring": "/recurring",
        "errors": "/errors",
        "bulk_cancel_preview": "/jobs/bulk-cancel?task=bench.t3",
    }


def measure(client: Client, urls: dict[str, str], repeat: int) -> dict[str, Any]:
    web = create_app(client).test_client()
    timings: dict[str, Any] = {}
    for name, url in urls.items():
        first = web.get(url)
        if first.status_code != 200:
            raise RuntimeError(f"{name}: {url} answered {first.status_code}: {first.data[:300]!r}")
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = web.get(url)
            seconds.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"{name}: {url} answered {response.status_code}")
        timings[name] = ms_summary(seconds)
        print(f"{name:24} p50 {timings[name]['p50']:8.1f} ms  p99 {timings[name]['p99']:8.1f} ms")
    return timings


def over_budget(
    timings: dict[str, Any], budget_ms: float, figure: str = "p99"
) -> list[tuple[str, float]]:
    """The verdict: each page whose ``figure`` (p99 by default) is over ``budget_ms``, as (what,
    found figure in ms)."""
    return [
        (f"{name} {figure} within {budget_ms} ms", figures[figure])
        for name, figures in timings.items()
        if figures[figure] > budget_ms
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--storage-url", required=True)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--budget-ms", type=float, default=BUDGET_MS)
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    refuse_existing(parser, ns.out)
    redis_url = ns.storage_url if ns.storage_url.startswith("redis") else None
    document: dict[str, Any] = {"environment": environment(redis_url), "options": options(ns)}
    prefix = f"bench_{uuid.uuid4().hex[:8]}"
    storage = storage_adapters.from_url(ns.storage_url, prefix=prefix)
    try:
        storage.setup()
        facts = fill(storage, ns.jobs, ns.batch)
        document["fill_seconds"] = facts["fill_seconds"]
        print(f"stored {ns.jobs} jobs in {facts['fill_seconds']} s")
        with Client(storage, retry_for=3.0) as client:
            document["pages_ms"] = measure(client, pages(facts), ns.repeat)
    finally:
        storage.drop()
        storage.close()
    document["load_average_at_end"] = load_average()
    failures = over_budget(document["pages_ms"], ns.budget_ms)
    worst = max(document["pages_ms"].items(), key=lambda item: item[1]["p99"])
    return conclude(
        "dashboard_pages",
        document,
        failures,
        lambda doc: (
            f"every page's p99 within {ns.budget_ms} ms (slowest: {worst[0]}, "
            f"{worst[1]['p99']} ms) with {ns.jobs} jobs"
        ),
        ns.out,
    )


if __name__ == "__main__":
    raise SystemExit(main())
