"""A burst through the process users run, beside the same release as one pass, in one run.

For each storage (PostgreSQL, Redis) and each way of storing (messages built at release by a
plain ``Client``; accept-time messages, as the plugin stores them), N jobs due at one instant
are released twice by the real command line, on fresh prefixes:

* **pass**: ``parallel-scheduler run --once``: one full pass; its own reported duration;
* **service**: ``parallel-scheduler run`` started before the due instant: time from the due
  instant to the last message in the broker list (sampled every 50 ms).

Both are checked before their figure is kept: every job id in the broker exactly once. The
service figure should be within 15% of the pass figure; a larger gap is a defect of the loop.

    .venv/bin/python -m benchmarks.service_burst --jobs 50000 --out service_burst.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import redis

from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec

POSTGRESQL = os.environ.get(
    "PARALLEL_SCHEDULER_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("PARALLEL_SCHEDULER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
COMMAND = str(Path(sys.executable).with_name("parallel-scheduler"))
STORE_CHUNK = 5000


def _broker(redis_url: str) -> str:
    """The broker: the Redis server's database 5, apart from the storage's."""
    return redis_url.rsplit("/", 1)[0] + "/5"


def _store(url: str, prefix: str, jobs: int, due: datetime, accept_time: bool) -> None:
    envelopes = None
    client = Client(storage_url=url, prefix=prefix)
    if accept_time:
        from parallel_scheduler.celery.app_loading import app_for_broker
        from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

        envelopes = RedisPublisher(app_for_broker(_broker(REDIS)))
        client.close()
        client = Client(storage_url=url, prefix=prefix, envelopes=envelopes)
    with client:
        client.setup()
        specs = [JobSpec("tasks.noop", args=[n], eta=due, id=f"j{n}") for n in range(jobs)]
        for start in range(0, jobs, STORE_CHUNK):
            client.schedule_many(specs[start : start + STORE_CHUNK])


def _check(broker: redis.Redis, jobs: int) -> None:
    ids = Counter(json.loads(m)["headers"]["id"] for m in broker.lrange("celery", 0, -1))
    wrong = {i: n for i, n in ids.items() if n != 1}
    if len(ids) != jobs or wrong:
        raise SystemExit(f"check failed: {len(ids)} distinct ids of {jobs}, repeated {wrong}")


def _base(url: str, prefix: str) -> list[str]:
    return [COMMAND, "--storage-url", url, "--prefix", prefix, "--log-level", "WARNING"]


def one_pass(url: str, jobs: int, accept_time: bool, broker: redis.Redis) -> float:
    prefix = "sb" + uuid.uuid4().hex[:8]
    broker.delete("celery")
    _store(url, prefix, jobs, datetime.now(timezone.utc) - timedelta(seconds=1), accept_time)
    out = subprocess.run(
        [*_base(url, prefix), "run", "--once", "--broker-url", _broker(REDIS)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    report = json.loads(out)["delayed"]
    _check(broker, jobs)
    return jobs / float(report["duration"])


def service(url: str, jobs: int, accept_time: bool, broker: redis.Redis) -> float:
    prefix = "sb" + uuid.uuid4().hex[:8]
    broker.delete("celery")
    due = datetime.now(timezone.utc) + timedelta(seconds=6 + jobs / 4000)
    _store(url, prefix, jobs, due, accept_time)
    process = subprocess.Popen(
        [*_base(url, prefix), "run", "--broker-url", _broker(REDIS)],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = due.timestamp() + 60 + jobs / 500
        while broker.llen("celery") < jobs:
            if time.time() > deadline:
                raise SystemExit(f"service released {broker.llen('celery')} of {jobs} in time")
            time.sleep(0.05)
        elapsed = time.time() - due.timestamp()
    finally:
        process.terminate()
        process.wait(30)
    _check(broker, jobs)
    return jobs / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--storages", nargs="+", default=["postgresql", "redis"])
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args(argv)
    if ns.out is not None and ns.out.exists():
        raise SystemExit(f"{ns.out} exists: results are never overwritten")
    broker = redis.Redis.from_url(_broker(REDIS))
    urls = {"postgresql": POSTGRESQL, "redis": REDIS.rsplit("/", 1)[0] + "/3"}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout
    rows: list[dict[str, Any]] = []
    document = {"commit": commit.strip(), "load_start": os.getloadavg(), "rows": rows}
    for storage in ns.storages:
        for accept_time in (False, True):
            pass_rate = one_pass(urls[storage], ns.jobs, accept_time, broker)
            service_rate = service(urls[storage], ns.jobs, accept_time, broker)
            row = {
                "storage": storage,
                "messages": "accept-time" if accept_time else "built at release",
                "jobs": ns.jobs,
                "pass_jobs_per_s": round(pass_rate),
                "service_jobs_per_s": round(service_rate),
                "service_vs_pass": round(service_rate / pass_rate, 3),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    document["load_end"] = os.getloadavg()
    broker.delete("celery")
    if ns.out is not None:
        ns.out.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
