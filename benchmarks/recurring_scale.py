"""Many recurring jobs stored, a window of ticks fired through ``parallel-scheduler run``.

N recurring jobs (default 1,000,000) of mixed crons and zones are saved with ``save_many`` (its
rate is reported): 1.5% fire every minute, 10% hourly at a random minute, the rest daily at a
random time, each in one of ``ZONES``: about 17,000 due a minute at N = 1,000,000. Then the real
command line runs (``--schedulers`` processes of ``parallel-scheduler run``; with
``--kill-at S`` the first is killed with SIGKILL S seconds in) for ``--window`` seconds, and
the harness drains the broker list every 50 ms, noting when each drain returned (the messages
are decoded after the window, so the harness takes no CPU from the scheduler meanwhile).

The check comes before the figures: an oracle that knows nothing of the product (``zoneinfo``
and a cron matcher of its own, minute by minute) lists every tick of every job in the window;
each must be in the broker exactly once (none missed, none doubled), and nothing else may be.
Then: tick -> broker lag (p50, p99, max), the scheduler processes' peak memory, and storage's
size per recurring job.

    .venv/bin/python -m benchmarks.recurring_scale --storage redis --jobs 1000000 --window 600
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psutil
import redis

from benchmarks.harness.report import git_commit, load_average, refuse_existing, write_once
from benchmarks.service_burst import COMMAND, POSTGRESQL, REDIS, _broker
from parallel_scheduler import Client
from storage_adapters import from_url, shard_of, shard_prefix

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Europe/London",
    "Asia/Kathmandu",
    "Pacific/Auckland",
]
#: (minute, hour) of each kind: None is '*'
Kind = tuple[int | None, int | None, str]


def kinds(count: int, seed: int) -> list[Kind]:
    """Each job's cron fields and zone, the mix of the module docstring."""
    rng = random.Random(seed)
    out: list[Kind] = []
    for _ in range(count):
        zone = rng.choice(ZONES)
        roll = rng.random()
        if roll < 0.015:
            out.append((None, None, zone))
        elif roll < 0.115:
            out.append((rng.randrange(60), None, zone))
        else:
            out.append((rng.randrange(60), rng.randrange(24), zone))
    return out


def cron_of(kind: Kind) -> str:
    minute, hour, _ = kind
    return f"{'*' if minute is None else minute} {'*' if hour is None else hour} * * *"


def oracle(kind_set: set[Kind], start: float, end: float) -> dict[Kind, list[float]]:
    """Per kind, its ticks in ``(start, end]``: every whole UTC minute read on the zone's wall
    clock and matched field by field."""
    minutes = []
    moment = datetime.fromtimestamp(start // 60 * 60 + 60, timezone.utc)
    while moment.timestamp() <= end:
        minutes.append(moment)
        moment += timedelta(minutes=1)
    walls = {zone: [m.astimezone(ZoneInfo(zone)) for m in minutes] for zone in ZONES}
    ticks: dict[Kind, list[float]] = {}
    for kind in kind_set:
        minute, hour, zone = kind
        ticks[kind] = [
            m.timestamp()
            for m, wall in zip(minutes, walls[zone], strict=True)
            if (minute is None or wall.minute == minute) and (hour is None or wall.hour == hour)
        ]
    return ticks


def _firing_tick(job_id: str) -> tuple[str, float]:
    rid, _, moment = job_id.partition("@")
    at = datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return rid, at.timestamp()


def run(ns: argparse.Namespace) -> dict[str, Any]:
    url = POSTGRESQL if ns.storage == "postgresql" else REDIS.rsplit("/", 1)[0] + "/3"
    prefix = "rs" + uuid.uuid4().hex[:8]
    broker = redis.Redis.from_url(_broker(REDIS))
    broker.delete("celery")
    job_kinds = kinds(ns.jobs, ns.seed)
    result: dict[str, Any] = {"storage": ns.storage, "jobs": ns.jobs, "shards": ns.shards}
    client = Client(storage_url=url, prefix=prefix, shards=ns.shards)
    client.setup()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # Every job's first tick is at or after `first`, a minute boundary after saving ends,
        # so no tick falls while saving or before the schedulers start.
        first = (time.time() + ns.jobs / 4000 + 30) // 60 * 60 + 60
        begin = datetime.fromtimestamp(first, timezone.utc)
        items = (
            {"id": f"r{n}", "task": "t.noop", "cron": cron_of(k), "timezone": k[2], "start": begin}
            for n, k in enumerate(job_kinds)
        )
        started = time.monotonic()
        client.recurring.save_many(items)
        result["save_many_s"] = round(time.monotonic() - started, 2)
        result["save_many_jobs_per_s"] = round(ns.jobs / result["save_many_s"])
        if time.time() > first - 5:
            raise SystemExit("saving ended too close to the first tick: nothing measured")
        result["storage_bytes_per_recurring_job"] = _storage_bytes(
            ns.storage, url, prefix, ns.jobs, ns.shards
        )
        base = [COMMAND, "--storage-url", url, "--prefix", prefix, "--shards", str(ns.shards)]
        command = [*base, "--log-level", "WARNING", "run", "--broker-url", _broker(REDIS)]
        processes.extend(
            subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(ns.schedulers)
        )
        window_start = first
        window_end = window_start + ns.window
        while time.time() < first - 1:
            time.sleep(0.2)
        drained: list[tuple[float, list[bytes]]] = []  # parsed after the window (see below)
        peak_rss = [0] * len(processes)
        killed = False
        while time.time() < window_end + ns.settle:
            now = time.time()
            if ns.kill_at is not None and not killed and now - window_start >= ns.kill_at:
                processes[0].send_signal(signal.SIGKILL)
                killed = True
                result["killed_at_s"] = round(now - window_start, 1)
            with broker.pipeline() as pipe:
                pipe.lrange("celery", 0, -1)
                pipe.delete("celery")
                messages, _ = pipe.execute()
            drained.append((time.time(), messages))
            for i, process in enumerate(processes):
                if process.poll() is None:
                    peak_rss[i] = max(peak_rss[i], psutil.Process(process.pid).memory_info().rss)
            time.sleep(0.05)
        result["scheduler_peak_rss_mb"] = [round(r / 2**20) for r in peak_rss]
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                process.wait(30)
        client.close()
        storage = from_url(url, prefix=prefix, shards=ns.shards)
        storage.drop()
        storage.close()
    # Parsed only now: decoding 17,000 messages a tick in the loop would take CPU from the
    # scheduler and the server on this machine's two cores, and stamp later drains late.
    arrivals: dict[str, list[float]] = defaultdict(list)
    for arrived, messages in drained:
        for message in messages:
            arrivals[json.loads(message)["headers"]["id"]].append(arrived)
    expected = oracle(set(job_kinds), first - 1, window_end)
    _check(job_kinds, expected, arrivals, result)
    lags = sorted(min(times) - _firing_tick(job_id)[1] for job_id, times in arrivals.items())
    result["firings"] = len(lags)
    result["lag_s"] = {
        "p50": round(statistics.median(lags), 3),
        "p99": round(lags[int(0.99 * (len(lags) - 1))], 3),
        "max": round(lags[-1], 3),
    }
    per_tick: dict[float, int] = Counter(_firing_tick(job_id)[1] for job_id in arrivals)
    result["firings_per_tick"] = {"max": max(per_tick.values()), "ticks": len(per_tick)}
    return result


def _check(
    job_kinds: list[Kind],
    expected: dict[Kind, list[float]],
    arrivals: dict[str, list[float]],
    result: dict[str, Any],
) -> None:
    """Every oracle tick in the broker once; nothing doubled; nothing the oracle did not list
    (a tick past the window's end may fire before the processes stop: it is counted, not
    failed)."""
    window_end = max((t for ticks in expected.values() for t in ticks), default=0.0)
    wanted: set[str] = set()
    for n, kind in enumerate(job_kinds):
        for tick in expected[kind]:
            stamp = datetime.fromtimestamp(tick, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            wanted.add(f"r{n}@{stamp}")
    doubled = {job_id: len(times) for job_id, times in arrivals.items() if len(times) > 1}
    missed = wanted - arrivals.keys()
    extra = {j for j in arrivals.keys() - wanted if _firing_tick(j)[1] <= window_end}
    result["check"] = {
        "expected": len(wanted),
        "missed": len(missed),
        "doubled": len(doubled),
        "unexpected": len(extra),
    }
    if missed or doubled or extra:
        raise SystemExit(
            f"check failed: {len(missed)} missed (e.g. {sorted(missed)[:3]}), {len(doubled)} "
            f"doubled (e.g. {list(doubled.items())[:3]}), {len(extra)} unexpected "
            f"(e.g. {sorted(extra)[:3]})"
        )


def _storage_bytes(storage: str, url: str, prefix: str, jobs: int, shards: int) -> float | None:
    """Storage's size per recurring job: Redis's used memory delta is not attributable on a
    shared server, so the sum of MEMORY USAGE of a sample of keys; PostgreSQL's table size with
    its indexes, every shard's."""
    if storage == "postgresql":
        import sqlalchemy as sa

        engine = sa.create_engine(url)
        with engine.connect() as conn:
            size = sum(
                conn.execute(
                    sa.text("SELECT pg_total_relation_size(:table)"),
                    {"table": f"{shard_prefix(prefix, shard)}_recurring"},
                ).scalar()
                or 0
                for shard in range(shards)
            )
        engine.dispose()
        return round(float(size) / jobs) if size else None
    server = redis.Redis.from_url(url)
    ids = [f"r{n}" for n in random.Random(1).sample(range(jobs), 1000)]
    sample = [f"{{{shard_prefix(prefix, shard_of(rid, shards))}}}:rec:{rid}" for rid in ids]
    hashes = sum(server.memory_usage(key) or 0 for key in sample) / len(sample)
    indexes = sum(
        server.memory_usage(f"{{{shard_prefix(prefix, shard)}}}:{key}") or 0
        for shard in range(shards)
        for key in ("rec_ids", "rec_due")
    )
    return round(hashes + indexes / jobs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", choices=("redis", "postgresql"), default="redis")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--window", type=float, default=600.0, help="seconds of ticks checked")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds drained after it")
    parser.add_argument("--schedulers", type=int, default=1)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--kill-at", type=float, help="SIGKILL the first scheduler then (s)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    document: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.recurring_scale", *(argv or sys.argv[1:])]),
        "commit": git_commit(),
        "load_start": load_average(),
    }
    document["result"] = run(ns)
    document["load_end"] = load_average()
    print(json.dumps(document), flush=True)
    write_once(ns.out, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
