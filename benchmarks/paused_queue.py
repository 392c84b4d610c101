"""What a paused queue full of due jobs costs the release of the others, through the process
users run, in one run.

For each storage (PostgreSQL, Redis), a burst of N jobs of the ``celery`` queue due at one
instant is released twice by the real command line, each time on a fresh prefix:

* **alone**: the store holds only the burst;
* **beside a paused queue**: the store also holds H jobs of the queue ``paused``, all due
  before the burst, stored scheduled and then paused (``Client.pause_queue``; how long that
  pause took to hold them is reported), so they are held when the burst falls due.

Each run is timed twice, as ``service_burst`` does: ``run --once`` (one pass, its own reported
duration) and ``parallel-scheduler run`` started before the due instant (the due instant to
the last message in the broker list). Both are checked before their figure is kept: every
burst job in the broker exactly once, none of the paused queue's, all H still held. The ratio
``beside/alone`` is the paused queue's cost (1.0: none).

    .venv/bin/python -m benchmarks.paused_queue --jobs 50000 --held 1000000 --out pq.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.report import git_commit, load_average, refuse_existing, write_once
from benchmarks.service_burst import (
    POSTGRESQL,
    REDIS,
    STORE_CHUNK,
    _base,
    _broker,
    _check,
    _drop,
    _wait_until,
)
from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from storage_adapters import JobState

PAUSED = "paused"


def _store(client: Client, specs: list[JobSpec]) -> None:
    for start in range(0, len(specs), STORE_CHUNK):
        client.schedule_many(specs[start : start + STORE_CHUNK])


def _prepare(
    url: str, prefix: str, jobs: int, held: int, lead: float
) -> tuple[datetime, dict[str, Any]]:
    """Store the held queue (paused) and the burst; the burst's due instant and the facts."""
    facts: dict[str, Any] = {}
    with Client(storage_url=url, prefix=prefix) as client:
        client.setup()
        if held:
            started = time.monotonic()
            past = datetime.now(timezone.utc) - timedelta(hours=1)
            _store(
                client,
                [
                    JobSpec("tasks.held", args=[n], eta=past, id=f"h{n}", options={"queue": PAUSED})
                    for n in range(held)
                ],
            )
            facts["held_stored_s"] = round(time.monotonic() - started, 2)
            started = time.monotonic()
            facts["held_by_pause"] = client.pause_queue(PAUSED, note="benchmark")
            facts["pause_s"] = round(time.monotonic() - started, 2)
        started = time.monotonic()
        due = datetime.now(timezone.utc) + timedelta(seconds=lead + jobs / 4000)
        _store(client, [JobSpec("tasks.noop", args=[n], eta=due, id=f"j{n}") for n in range(jobs)])
        facts["burst_stored_s"] = round(time.monotonic() - started, 2)
    return due, facts


def _still_held(url: str, prefix: str, held: int) -> None:
    with Client(storage_url=url, prefix=prefix) as client:
        counts = client.counts()
    if counts.get(JobState.HELD.value, 0) != held:
        raise SystemExit(f"check failed: {counts} (expected {held} held)")


def one_pass(url: str, jobs: int, held: int, broker: redis.Redis, lead: float) -> dict[str, Any]:
    prefix = "pq" + uuid.uuid4().hex[:8]
    broker.delete("celery", PAUSED)
    try:
        due, facts = _prepare(url, prefix, jobs, held, lead)
        _wait_until(due)
        out = subprocess.run(
            [*_base(url, prefix, 1), "run", "--once", "--broker-url", _broker(REDIS)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        _check(broker, jobs)
        if broker.llen(PAUSED):
            raise SystemExit("check failed: a paused queue's job reached the broker")
        _still_held(url, prefix, held)
    finally:
        _drop(url, prefix, 1)
    facts["pass_jobs_per_s"] = round(jobs / float(json.loads(out)["delayed"]["duration"]))
    return facts


def service(url: str, jobs: int, held: int, broker: redis.Redis, lead: float) -> dict[str, Any]:
    prefix = "pq" + uuid.uuid4().hex[:8]
    broker.delete("celery", PAUSED)
    try:
        due, facts = _prepare(url, prefix, jobs, held, lead)
        process = subprocess.Popen(
            [*_base(url, prefix, 1), "run", "--broker-url", _broker(REDIS)],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = due.timestamp() + 60 + jobs / 500
            while broker.llen("celery") < jobs:
                if time.time() > deadline:
                    raise SystemExit(f"service released {broker.llen('celery')} of {jobs}")
                time.sleep(0.05)
            elapsed = time.time() - due.timestamp()
        finally:
            process.terminate()
            process.wait(30)
        _check(broker, jobs)
        if broker.llen(PAUSED):
            raise SystemExit("check failed: a paused queue's job reached the broker")
        _still_held(url, prefix, held)
    finally:
        _drop(url, prefix, 1)
    facts["service_jobs_per_s"] = round(jobs / elapsed)
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="the burst of the other queue")
    parser.add_argument("--held", type=int, default=1_000_000, help="due jobs of the paused queue")
    parser.add_argument("--lead", type=float, default=6.0)
    parser.add_argument("--storages", nargs="+", default=["postgresql", "redis"])
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    broker = redis.Redis.from_url(_broker(REDIS))
    urls = {"postgresql": POSTGRESQL, "redis": REDIS.rsplit("/", 1)[0] + "/3"}
    rows: list[dict[str, Any]] = []
    document = {
        "command": " ".join(["python -m benchmarks.paused_queue", *(argv or sys.argv[1:])]),
        "commit": git_commit(),
        "load_start": load_average(),
        "rows": rows,
    }
    for storage in ns.storages:
        alone = {
            **one_pass(urls[storage], ns.jobs, 0, broker, ns.lead),
            **service(urls[storage], ns.jobs, 0, broker, ns.lead),
        }
        beside = {
            **one_pass(urls[storage], ns.jobs, ns.held, broker, ns.lead),
            **service(urls[storage], ns.jobs, ns.held, broker, ns.lead),
        }
        row = {
            "storage": storage,
            "jobs": ns.jobs,
            "held": ns.held,
            "alone": alone,
            "beside_paused": beside,
            "pass_ratio": round(beside["pass_jobs_per_s"] / alone["pass_jobs_per_s"], 3),
            "service_ratio": round(beside["service_jobs_per_s"] / alone["service_jobs_per_s"], 3),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    document["load_end"] = load_average()
    broker.delete("celery", PAUSED)
    write_once(ns.out, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
