"""What a paused queue full of due jobs costs the release of the others, through the process
users run, in one run.

For each storage (PostgreSQL, Redis), two stores side by side:

* **alone**: it holds only the bursts;
* **beside a paused queue**: it also holds H jobs of the queue ``paused``, all due before any
  burst, stored scheduled and then paused (``Client.pause_queue``; how long that pause took to
  hold them is reported), so they are held when each burst falls due.

A fresh burst of N jobs of the ``celery`` queue due at one instant is released by the real
command line in each store in turn, ``--repetitions`` times, timed as ``service_burst`` does:
``run --once`` (one pass, its own reported duration) and ``parallel-scheduler run`` started
before the due instant (the due instant to the last message in the broker list). Each run is
checked before its figure is kept: every burst job in the broker exactly once, none of the
paused queue's, all H still held. The first run beside the paused queue follows the pause at
once (on PostgreSQL its due index still holds the held jobs' old entries until a vacuum); every
sample is kept. The ratio ``beside/alone`` of the medians is the paused queue's cost (1.0:
none).

    .venv/bin/python -m benchmarks.paused_queue --jobs 50000 --held 1000000 --out pq.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

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


class Store:
    """One prefix the burst runs in, beside ``held`` due jobs of the paused queue (0: alone)."""

    def __init__(self, url: str, held: int) -> None:
        self.url, self.held = url, held
        self.prefix = "pq" + uuid.uuid4().hex[:8]
        self.facts: dict[str, Any] = {}
        self.bursts = 0
        with Client(storage_url=url, prefix=self.prefix) as client:
            client.setup()
            if not held:
                return
            started = time.monotonic()
            past = datetime.now(timezone.utc) - timedelta(hours=1)
            specs = [
                JobSpec("tasks.held", args=[n], eta=past, id=f"h{n}", options={"queue": PAUSED})
                for n in range(held)
            ]
            _store(client, specs)
            self.facts["held_stored_s"] = round(time.monotonic() - started, 2)
            started = time.monotonic()
            self.facts["held_by_pause"] = client.pause_queue(PAUSED, note="benchmark")
            self.facts["pause_s"] = round(time.monotonic() - started, 2)

    def burst(self, jobs: int, lead: float) -> datetime:
        """Store a fresh burst of ``jobs`` due ``lead`` seconds after storing ends."""
        self.bursts += 1
        with Client(storage_url=self.url, prefix=self.prefix) as client:
            due = datetime.now(timezone.utc) + timedelta(seconds=lead + jobs / 4000)
            ids = (f"b{self.bursts}-{n}" for n in range(jobs))
            _store(client, [JobSpec("tasks.noop", args=[1], eta=due, id=i) for i in ids])
        return due

    def check(self, broker: redis.Redis, jobs: int) -> None:
        """Every burst job in the broker once, none of the paused queue's, all still held."""
        _check(broker, jobs)
        if broker.llen(PAUSED):
            raise SystemExit("check failed: a paused queue's job reached the broker")
        with Client(storage_url=self.url, prefix=self.prefix) as client:
            counts = client.counts()
        if counts.get(JobState.HELD.value, 0) != self.held:
            raise SystemExit(f"check failed: {counts} (expected {self.held} held)")

    def drop(self) -> None:
        _drop(self.url, self.prefix, 1)


class BurstStore(Protocol):
    """What ``one_pass`` and ``service`` run a burst in (this module's ``Store``, and
    ``limited_queue``'s)."""

    url: str
    prefix: str
    facts: dict[str, Any]

    def burst(self, jobs: int, lead: float) -> datetime: ...

    def drop(self) -> None: ...

    def check(self, broker: redis.Redis, jobs: int) -> None: ...


def one_pass(store: BurstStore, jobs: int, broker: redis.Redis, lead: float) -> float:
    """Jobs per second of one ``run --once`` pass over a fresh burst (its own duration)."""
    broker.delete("celery", PAUSED)
    _wait_until(store.burst(jobs, lead))
    out = subprocess.run(
        [*_base(store.url, store.prefix, 1), "run", "--once", "--broker-url", _broker(REDIS)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    store.check(broker, jobs)
    return jobs / float(json.loads(out)["delayed"]["duration"])


def service(store: BurstStore, jobs: int, broker: redis.Redis, lead: float) -> float:
    """Jobs per second through ``parallel-scheduler run``: the due instant to the last message."""
    broker.delete("celery", PAUSED)
    due = store.burst(jobs, lead)
    process = subprocess.Popen(
        [*_base(store.url, store.prefix, 1), "run", "--broker-url", _broker(REDIS)],
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
    store.check(broker, jobs)
    return jobs / elapsed


def measure(url: str, ns: argparse.Namespace, broker: redis.Redis, storage: str) -> dict[str, Any]:
    """One storage's row: the two stores side by side, runs interleaved, medians kept."""
    stores: dict[str, BurstStore] = {"alone": Store(url, 0), "beside_paused": Store(url, ns.held)}
    row: dict[str, Any] = {"storage": storage, "jobs": ns.jobs, "held": ns.held}
    return {**row, **side_by_side(stores, ns, broker)}


def side_by_side(
    stores: dict[str, BurstStore],
    ns: argparse.Namespace,
    broker: redis.Redis,
    after: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Each store's figures (``alone`` first, then the one beside), runs of the pass and of the
    service interleaved ``ns.repetitions`` times, medians and every sample kept, and the ratios
    beside/alone; ``after`` runs once the runs are done, before the stores are dropped."""
    samples: dict[str, dict[str, list[float]]] = {
        name: {"pass": [], "service": []} for name in stores
    }
    try:
        for _ in range(ns.repetitions):
            for name, store in stores.items():
                samples[name]["pass"].append(one_pass(store, ns.jobs, broker, ns.lead))
            for name, store in stores.items():
                samples[name]["service"].append(service(store, ns.jobs, broker, ns.lead))
        if after is not None:
            after()
    finally:
        for store in stores.values():
            store.drop()
    row: dict[str, Any] = {}
    for name, store in stores.items():
        row[name] = {
            **store.facts,
            "pass_jobs_per_s": round(statistics.median(samples[name]["pass"])),
            "service_jobs_per_s": round(statistics.median(samples[name]["service"])),
            "samples": {k: [round(v) for v in vs] for k, vs in samples[name].items()},
        }
    alone, beside = list(stores)
    for figure in ("pass", "service"):
        key = f"{figure}_jobs_per_s"
        row[f"{figure}_ratio"] = round(row[beside][key] / row[alone][key], 3)
    return row


def side_by_side_parser(description: str) -> argparse.ArgumentParser:
    """The options every side-by-side benchmark takes (this one, ``limited_queue``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--jobs", type=int, default=50_000, help="the burst of the other queue")
    parser.add_argument("--lead", type=float, default=4.0)
    parser.add_argument(
        "--repetitions", type=int, default=3, help="runs of each figure, interleaved (medians)"
    )
    parser.add_argument("--storages", nargs="+", default=["postgresql", "redis"])
    parser.add_argument("--out", type=Path)
    return parser


Measure = Callable[[str, argparse.Namespace, redis.Redis, str], dict[str, Any]]


def run_side_by_side(
    module: str, argv: list[str] | None, ns: argparse.Namespace, measure: Measure, lists: list[str]
) -> int:
    """Each storage's row (``measure``), printed as it comes and written with the command, the
    commit and the load average before and after; the broker ``lists`` emptied at the end."""
    broker = redis.Redis.from_url(_broker(REDIS))
    urls = {"postgresql": POSTGRESQL, "redis": REDIS.rsplit("/", 1)[0] + "/3"}
    rows: list[dict[str, Any]] = []
    document = {
        "command": " ".join([f"python -m benchmarks.{module}", *(argv or sys.argv[1:])]),
        "commit": git_commit(),
        "load_start": load_average(),
        "rows": rows,
    }
    for storage in ns.storages:
        row = measure(urls[storage], ns, broker, storage)
        rows.append(row)
        print(json.dumps(row), flush=True)
    document["load_end"] = load_average()
    broker.delete(*lists)
    write_once(ns.out, document)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = side_by_side_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=1_000_000, help="due jobs of the paused queue")
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    return run_side_by_side("paused_queue", argv, ns, measure, ["celery", PAUSED])


if __name__ == "__main__":
    raise SystemExit(main())
