"""A burst through the process users run, beside the same release as one pass, in one run.

For each storage (PostgreSQL, Redis) and each way of storing (messages built at release by a
plain ``Client``; accept-time messages, as the plugin stores them), N jobs due at one instant
are released twice by the real command line, on fresh prefixes:

* **pass**: ``parallel-scheduler run --once``: one full pass; its own reported duration;
* **service**: ``parallel-scheduler run`` started before the due instant: time from the due
  instant to the last message in the broker list (sampled every 50 ms).

Both are checked before their figure is kept: every job id in the broker exactly once. The
service figure should be within 15% of the pass figure; a larger gap is a defect of the loop.
``--recurring N`` adds the recurring scheduler's row: N recurring jobs whose first tick is one
instant (an hourly interval starting then), saved by one ``save_many`` (its rate is reported),
fired and released by the same two runs (``tick_to_last_message_s``: the tick to the last
firing in the broker, through the service);
``--shards S`` runs everything on a store split into S shards. Each prefix is dropped after its
run. ``--limits`` also runs ``benchmarks.limits`` at the same size in the same run and puts
its figure for the same path (and the raw limit of that storage) beside each delayed row.
``--repetitions R`` runs each pair R times, pass and service in turn, and reports the medians
(every sample is kept in the JSON); the service's fixed cost is reported as ``first_message_s``,
the due instant to the first message in the broker.

    .venv/bin/python -m benchmarks.service_burst --jobs 50000 --recurring 10000 --out sb.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import redis

from benchmarks.harness.limit_items import ONE_SCRIPT, RAW_LUA, RAW_PG
from benchmarks.harness.measure import MIB, PeakSampler
from benchmarks.harness.report import git_commit, load_average, refuse_existing, write_once
from devtools.processes import ROOT
from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from parallel_scheduler.recurring.planning_ahead import PLAN_AHEAD
from storage_adapters import from_url

POSTGRESQL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("PARALLEL_SCHEDULER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
COMMAND = str(Path(sys.executable).with_name("parallel-scheduler"))
STORE_CHUNK = 5000
#: The item of ``limits.py`` that releases as each delayed row does, and that storage's limit.
LIMITS_ITEMS = {
    ("postgresql", False): ("pg-release", "batch + fast publish"),
    ("postgresql", True): ("pg-release", "defaults (Settings())"),
    ("redis", False): ("redis-release", "batch + fast publish"),
    ("redis", True): ("redis-release", ONE_SCRIPT),
}
RAW_LIMITS = {"pg-release": RAW_PG, "redis-release": RAW_LUA}


def _broker(redis_url: str) -> str:
    """The broker: the Redis server's database 5, apart from the storage's."""
    return redis_url.rsplit("/", 1)[0] + "/5"


class Burst:
    """What one row stores: ``jobs`` delayed jobs (``recurring=False``) or recurring jobs whose
    first tick is the due instant, on ``shards`` shards, messages built at accept or release."""

    def __init__(
        self, jobs: int, accept_time: bool, recurring: bool, shards: int, lead: float
    ) -> None:
        self.jobs = jobs
        self.min_lead = lead
        self.stored_in: float | None = None  # seconds the last store took
        self.accept_time = accept_time
        self.recurring = recurring
        self.shards = shards

    def client(self, url: str, prefix: str) -> Client:
        envelopes = None
        if self.accept_time:
            from parallel_scheduler.celery.app_loading import app_for_broker
            from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

            envelopes = RedisPublisher(app_for_broker(_broker(REDIS)))
        return Client(storage_url=url, prefix=prefix, shards=self.shards, envelopes=envelopes)

    def store(self, url: str, prefix: str, due: datetime) -> None:
        started = time.monotonic()
        try:
            self._store(url, prefix, due)
        finally:
            self.stored_in = time.monotonic() - started

    def _store(self, url: str, prefix: str, due: datetime) -> None:
        with self.client(url, prefix) as client:
            client.setup()
            if self.recurring:
                items = [
                    {"id": f"r{n}", "task": "tasks.noop", "every": 3600, "start": due, "args": [n]}
                    for n in range(self.jobs)
                ]
                client.recurring.save_many(items)
                return
            specs = [JobSpec("tasks.noop", args=[n], eta=due, id=f"j{n}") for n in range(self.jobs)]
            for start in range(0, self.jobs, STORE_CHUNK):
                client.schedule_many(specs[start : start + STORE_CHUNK])

    def lead(self) -> float:
        """Seconds ahead the due instant is set, so storing ends before it: the last store's
        time with a margin, or an estimate before the first. A recurring burst's tick is
        ``PLAN_AHEAD`` seconds later still, so the service, started once storing ends, has the
        whole window to plan the tick, as it has for jobs saved before it starts."""
        if self.stored_in is not None:
            lead = self.min_lead + 1.3 * self.stored_in
        else:
            lead = self.min_lead + self.jobs / (2000 if self.recurring else 4000)
        return lead + PLAN_AHEAD if self.recurring else lead


def _drop(url: str, prefix: str, shards: int) -> None:
    storage = from_url(url, prefix=prefix, shards=shards)
    try:
        storage.drop()
    finally:
        storage.close()


def _check(broker: redis.Redis, jobs: int) -> None:
    ids = Counter(json.loads(m)["headers"]["id"] for m in broker.lrange("celery", 0, -1))
    wrong = {i: n for i, n in ids.items() if n != 1}
    if len(ids) != jobs or wrong:
        raise SystemExit(f"check failed: {len(ids)} distinct ids of {jobs}, repeated {wrong}")


def _base(url: str, prefix: str, shards: int) -> list[str]:
    return [
        *(COMMAND, "--storage-url", url, "--prefix", prefix, "--shards", str(shards)),
        *("--log-level", "WARNING"),
    ]


def _wait_until(moment: datetime) -> None:
    while (left := moment.timestamp() - time.time()) > 0:
        time.sleep(min(left, 0.5))


def one_pass(url: str, burst: Burst, broker: redis.Redis) -> float:
    """Jobs per second of one ``run --once`` pass, from its own reported durations (the
    recurring pass's too when it fires the burst)."""
    prefix = "sb" + uuid.uuid4().hex[:8]
    broker.delete("celery")
    due = datetime.now(timezone.utc) + timedelta(seconds=burst.lead() if burst.recurring else -1)
    try:
        burst.store(url, prefix, due)
        _wait_until(due)
        out = subprocess.run(
            [*_base(url, prefix, burst.shards), "run", "--once", "--broker-url", _broker(REDIS)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        report = json.loads(out)
        _check(broker, burst.jobs)
    finally:
        _drop(url, prefix, burst.shards)
    spent = float(report["delayed"]["duration"])
    if burst.recurring:
        spent += float(report["recurring"]["duration"])
    return burst.jobs / spent


def service(url: str, burst: Burst, broker: redis.Redis) -> tuple[float, float, int]:
    """Jobs per second through ``parallel-scheduler run`` (due instant to last message),
    seconds from the due instant to the first message (the loop's fixed cost), and the
    process's peak RSS in bytes (a recurring burst's plan is held in it until its tick)."""
    prefix = "sb" + uuid.uuid4().hex[:8]
    broker.delete("celery")
    due = datetime.now(timezone.utc) + timedelta(seconds=burst.lead())
    jobs = burst.jobs
    try:
        burst.store(url, prefix, due)
        process = subprocess.Popen(
            [*_base(url, prefix, burst.shards), "run", "--broker-url", _broker(REDIS)],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = due.timestamp() + 60 + jobs / 500
            first: float | None = None
            with PeakSampler(process.pid) as peak:
                while (sent := broker.llen("celery")) < jobs:
                    if first is None and sent:
                        first = time.time() - due.timestamp()
                    if time.time() > deadline:
                        raise SystemExit(
                            f"service released {broker.llen('celery')} of {jobs} in time"
                        )
                    time.sleep(0.05)
            elapsed = time.time() - due.timestamp()
            first = elapsed if first is None else first
        finally:
            process.terminate()
            process.wait(30)
        _check(broker, jobs)
    finally:
        _drop(url, prefix, burst.shards)
    return jobs / elapsed, first, peak.peak


def limits_figures(storages: list[str], jobs: int, out: Path) -> dict[str, Any]:
    """``limits.py``'s release groups for ``storages`` at ``jobs`` jobs a run, one run each."""
    groups = sorted({LIMITS_ITEMS[(storage, False)][0] for storage in storages})
    subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.limits"),
            *("--jobs", str(jobs), "--repetitions", "1", "--warmup", "0", "--token-chars", "8"),
            *("--redis-url", REDIS, "--postgresql-url", POSTGRESQL, "--out", str(out)),
            *("--only", *groups),
        ],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    figures: dict[str, Any] = json.loads(out.read_text())["groups"]
    return figures


def _beside_limits(row: dict[str, Any], groups: dict[str, Any], accept_time: bool) -> None:
    group, name = LIMITS_ITEMS[(row["storage"], accept_time)]
    items = groups[group]["items"]
    path = items[name]["median_jobs_per_s"]
    row["limits_path"] = f"{group}/{name}"
    row["limits_path_jobs_per_s"] = None if path is None else round(path)
    raw = items[RAW_LIMITS[group]]["median_jobs_per_s"]
    row["raw_limit_jobs_per_s"] = None if raw is None else round(raw)
    if path:
        row["service_vs_limits_path"] = round(row["service_jobs_per_s"] / path, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--recurring", type=int, default=0, help="recurring jobs (0: none)")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument(
        "--lead", type=float, default=6.0, help="seconds between storing's end and the due instant"
    )
    parser.add_argument("--storages", nargs="+", default=["postgresql", "redis"])
    parser.add_argument("--limits", action="store_true", help="limits.py's figures beside")
    parser.add_argument(
        "--repetitions", type=int, default=1, help="pass and service runs per row (medians)"
    )
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    broker = redis.Redis.from_url(_broker(REDIS))
    urls = {"postgresql": POSTGRESQL, "redis": REDIS.rsplit("/", 1)[0] + "/3"}
    rows: list[dict[str, Any]] = []
    document = {
        "command": " ".join(["python -m benchmarks.service_burst", *(argv or sys.argv[1:])]),
        "commit": git_commit(),
        "load_start": load_average(),
        "rows": rows,
    }
    bursts = [
        Burst(ns.jobs, accept, False, ns.shards, ns.lead) for accept in (False, True) if ns.jobs
    ]
    bursts += [Burst(ns.recurring, False, True, ns.shards, ns.lead)] if ns.recurring else []
    groups: dict[str, Any] = {}
    if ns.limits and ns.jobs:
        scratch = Path(f"/tmp/service_burst_limits_{uuid.uuid4().hex[:8]}.json")
        groups = limits_figures(ns.storages, ns.jobs, scratch)
        document["limits"] = {"command": "benchmarks/limits.py", "groups": groups}
        scratch.unlink()
    for storage in ns.storages:
        for burst in bursts:
            passes: list[float] = []
            services: list[float] = []
            firsts: list[float] = []
            peaks: list[int] = []
            for _ in range(ns.repetitions):
                passes.append(one_pass(urls[storage], burst, broker))
                service_rate, first, peak = service(urls[storage], burst, broker)
                services.append(service_rate)
                firsts.append(first)
                peaks.append(peak)
            pass_rate = statistics.median(passes)
            service_rate = statistics.median(services)
            row = {
                "storage": storage,
                "kind": "recurring" if burst.recurring else "delayed",
                "shards": burst.shards,
                "messages": "accept-time" if burst.accept_time else "built at release",
                "jobs": burst.jobs,
                "pass_jobs_per_s": round(pass_rate),
                "service_jobs_per_s": round(service_rate),
                "service_vs_pass": round(service_rate / pass_rate, 3),
                "first_message_s": round(statistics.median(firsts), 3),
                "service_peak_rss_mib": round(max(peaks) / MIB),
                "samples": {
                    "pass_jobs_per_s": [round(r) for r in passes],
                    "service_jobs_per_s": [round(r) for r in services],
                    "first_message_s": [round(f, 3) for f in firsts],
                },
            }
            if burst.recurring and burst.stored_in:
                # the last store: one save_many of every recurring job, through Client
                row["save_many_jobs_per_s"] = round(burst.jobs / burst.stored_in)
                row["tick_to_last_message_s"] = round(burst.jobs / service_rate, 3)
            if groups and not burst.recurring:
                _beside_limits(row, groups, burst.accept_time)
            rows.append(row)
            print(json.dumps(row), flush=True)
    document["load_end"] = load_average()
    broker.delete("celery")
    write_once(ns.out, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
