"""What a rate-limited queue costs the release of the others, through the process users run, in
one run.

For each storage (PostgreSQL, Redis), two stores side by side:

* **alone**: no limit in force; it holds only the bursts;
* **beside a limited queue**: a limit of ``--rate`` jobs a second on the queue ``limited``, and
  L jobs of that queue all due before any burst. A first ``run --once`` pass gives each of them
  its slot (``defer``): how long that took and how many it deferred is reported, the one-time
  cost of a backlog meeting a limit. They then wait at their slots, released ``--rate`` a second
  while the bursts run.

A fresh burst of N jobs of the ``celery`` queue due at one instant is released by the real
command line in each store in turn, ``--repetitions`` times, timed as ``paused_queue`` does:
``run --once`` (one pass, its own reported duration) and ``parallel-scheduler run`` started
before the due instant (the due instant to the last message in the broker list). Each run is
checked before its figure is kept: every burst job in the broker exactly once, and the limited
queue's list never longer than the limit allows since it was set. The ratio ``beside/alone`` of
the medians is the limit's cost (1.0: none). On Redis it includes the one-script release
stepping aside while a limit is in force (the batch path carries every release then).

    .venv/bin/python -m benchmarks.limited_queue --jobs 50000 --limited 1000000 --out lq.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import redis

from benchmarks.harness.report import refuse_existing
from benchmarks.paused_queue import BurstStore, run_side_by_side, side_by_side, side_by_side_parser
from benchmarks.service_burst import REDIS, STORE_CHUNK, _base, _broker, _check, _drop
from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec

LIMITED = "limited"


class Store:
    """One prefix the bursts run in, beside ``limited`` due jobs of a limited queue (0: alone,
    and no limit in force)."""

    def __init__(self, url: str, limited: int, rate: int) -> None:
        self.url, self.limited, self.rate = url, limited, rate
        self.prefix = "lq" + uuid.uuid4().hex[:8]
        self.facts: dict[str, Any] = {}
        self.bursts = 0
        self.limit_set_at = 0.0
        with Client(storage_url=url, prefix=self.prefix) as client:
            client.setup()
            if not limited:
                return
            past = datetime.now(timezone.utc) - timedelta(hours=1)
            specs = [
                JobSpec("tasks.limited", args=[n], eta=past, id=f"l{n}", options={"queue": LIMITED})
                for n in range(limited)
            ]
            started = time.monotonic()
            for start in range(0, len(specs), STORE_CHUNK):
                client.schedule_many(specs[start : start + STORE_CHUNK])
            self.facts["limited_stored_s"] = round(time.monotonic() - started, 2)
            client.limit_queue(LIMITED, f"{rate}/s")
            self.limit_set_at = time.time()

    def give_slots(self, broker: redis.Redis) -> None:
        """The first pass over the limited backlog: each job given its slot."""
        started = time.monotonic()
        out = subprocess.run(
            [*_base(self.url, self.prefix, 1), "run", "--once", "--broker-url", _broker(REDIS)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        self.facts["slots_given_s"] = round(time.monotonic() - started, 2)
        self.facts["deferred_in_first_pass"] = json.loads(out)["delayed"]["deferred"]
        self.check(broker, 0)

    def burst(self, jobs: int, lead: float) -> datetime:
        """Store a fresh burst of ``jobs`` due ``lead`` seconds after storing ends."""
        self.bursts += 1
        with Client(storage_url=self.url, prefix=self.prefix) as client:
            due = datetime.now(timezone.utc) + timedelta(seconds=lead + jobs / 4000)
            ids = (f"b{self.bursts}-{n}" for n in range(jobs))
            specs = [JobSpec("tasks.noop", args=[1], eta=due, id=i) for i in ids]
            for start in range(0, len(specs), STORE_CHUNK):
                client.schedule_many(specs[start : start + STORE_CHUNK])
        return due

    def check(self, broker: redis.Redis, jobs: int) -> None:
        """Every burst job in the broker once; the limited queue within its budget so far."""
        if jobs:
            _check(broker, jobs)
        if self.limited:
            budget = 1 + self.rate * (time.time() - self.limit_set_at)
            released = broker.llen(LIMITED)
            if released > budget:
                raise SystemExit(f"check failed: {released} limited jobs out, budget {budget:.0f}")

    def drop(self) -> None:
        _drop(self.url, self.prefix, 1)


def measure(url: str, ns: argparse.Namespace, broker: redis.Redis, storage: str) -> dict[str, Any]:
    """One storage's row: the two stores side by side, runs interleaved, medians kept."""
    broker.delete("celery", LIMITED)
    limited = Store(url, ns.limited, ns.rate)
    stores: dict[str, BurstStore] = {"alone": Store(url, 0, ns.rate), "beside_limited": limited}
    try:
        limited.give_slots(broker)
    except BaseException:
        for store in stores.values():
            store.drop()
        raise
    figures = side_by_side(stores, ns, broker, after=lambda: limited.check(broker, 0))
    row: dict[str, Any] = {
        "storage": storage, "jobs": ns.jobs, "limited": ns.limited, "rate": ns.rate,
        "limited_released": broker.llen(LIMITED),
    }  # fmt: skip
    return {**row, **figures}


def main(argv: list[str] | None = None) -> int:
    parser = side_by_side_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--limited", type=int, default=1_000_000, help="due jobs of the limited queue"
    )
    parser.add_argument("--rate", type=int, default=100, help="the limit, jobs a second")
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    return run_side_by_side("limited_queue", argv, ns, measure, ["celery", LIMITED])


if __name__ == "__main__":
    raise SystemExit(main())
