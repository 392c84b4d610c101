"""A PostgreSQL burst released by ``parallel-scheduler run``, the process users run, keeps its pace
to the end (issue 19, section 1).

A long burst stalled there at about one chunk a second once PostgreSQL switched the claim's
prepared statement to a generic plan (after its fifth run on a connection): the first chunks left
at full speed, the rest at a fraction of it. So the oracle is the burst's own start: the last 90%
of the jobs must leave at no less than a fifth of the pace of the first 10% (an even pace gives
9 times the first tenth's time; the stall gave 60 times and more). A ratio within one run, so a
loaded machine slows both parts alike; no wall-clock ceiling.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

import storage_adapters
from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server

JOBS = 50_000
COMMAND = str(Path(sys.executable).with_name("parallel-scheduler"))


@pytest.mark.postgresql
@pytest.mark.redis
def test_a_burst_keeps_its_pace_to_the_end_in_the_service() -> None:
    require_server("postgresql")
    require_server("redis")
    prefix = "burst" + uuid.uuid4().hex[:8]
    queue = f"burst-{prefix}"
    broker = redis.Redis.from_url(REDIS_URL)
    # Given 50,000 jobs stored by a plain Client (messages built at release), due at one instant
    due = datetime.now(timezone.utc) + timedelta(seconds=2)
    with Client(storage_url=POSTGRESQL_URL, prefix=prefix) as client:
        client.setup()
        specs = [
            JobSpec("tasks.noop", args=[n], eta=due, id=f"j{n}", options={"queue": queue})
            for n in range(JOBS)
        ]
        for start in range(0, JOBS, 5000):
            client.schedule_many(specs[start : start + 5000])
    base = [COMMAND, "--storage-url", POSTGRESQL_URL, "--prefix", prefix, "--log-level", "WARNING"]
    # When `parallel-scheduler run` releases them (default settings, a Redis broker)
    service = subprocess.Popen(
        [*base, "run", "--broker-url", REDIS_URL], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        # (the broker's list sampled from its first message until every job is there)
        first = tenth = None
        deadline = time.monotonic() + 600
        while (count := broker.llen(queue)) < JOBS:
            assert service.poll() is None, service.stderr.read() if service.stderr else ""
            assert time.monotonic() < deadline, f"{count} of {JOBS} released"
            now = time.monotonic()
            if first is None and count:
                first = now
            if tenth is None and count >= JOBS // 10:
                tenth = now
            time.sleep(0.01)
        last = time.monotonic()
    finally:
        service.terminate()
        service.wait(30)
        broker.delete(queue)
        store = storage_adapters.from_url(POSTGRESQL_URL, prefix=prefix)
        store.drop()
        store.close()
    assert first is not None and tenth is not None
    # Then the last 90% left at no less than a fifth of the first 10%'s pace
    assert last - tenth <= 5 * 9 * max(tenth - first, 0.01), (first, tenth, last)
