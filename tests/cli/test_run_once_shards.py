"""``run --once`` on a sharded store runs each shard's pass under that shard's lock, as the
service's loops do: a shard whose lock another scheduler holds is left to it, and the others are
released (each job once) on their own release paths."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis

import storage_adapters
from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from storage_adapters import shard_of
from storage_adapters.sharding import shard_prefix
from tests.conftest import REDIS_URL, require_server

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 3
JOBS = 600


@pytest.mark.redis
def test_once_releases_every_shard_but_the_one_another_scheduler_holds() -> None:
    require_server("redis")
    prefix = "once" + uuid.uuid4().hex[:8]
    queue = f"q-{prefix}"
    broker = redis.Redis.from_url(REDIS_URL)
    store = storage_adapters.from_url(REDIS_URL, prefix=prefix, shards=SHARDS)
    store.setup()
    held = storage_adapters.from_url(REDIS_URL, prefix=shard_prefix(prefix, 1))
    try:
        # Given due jobs on three shards, and shard 1's lock held by another scheduler
        with Client(storage=store) as client:
            ids = [
                r.job_id
                for r in client.schedule_many(
                    [JobSpec("tasks.noop", args=[n], options={"queue": queue}) for n in range(JOBS)]
                )
            ]
        assert held.acquire_lock("delayed-scheduler", "someone-else", 60.0) is not None
        # When `run --once` runs on the sharded store
        done = subprocess.run(
            [sys.executable, "-m", "parallel_scheduler", "--log-level", "WARNING",
             "--storage-url", REDIS_URL, "--prefix", prefix, "--shards", str(SHARDS),
             "run", "--broker-url", REDIS_URL, "--once"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)["delayed"]
        # Then every job of shards 0 and 2 is in the broker once, and shard 1's wait for it
        expected = sorted(i for i in ids if shard_of(i, SHARDS) != 1)
        assert 0 < len(expected) < JOBS
        sent = Counter(json.loads(m)["headers"]["id"] for m in broker.lrange(queue, 0, -1))
        assert sorted(sent) == expected and set(sent.values()) == {1}
        assert report["released"] == len(expected) and report["lock_acquired"] is False
        assert store.count_by_state()["scheduled"] == JOBS - len(expected)
        assert "another scheduler holds the lock" in done.stderr
    finally:
        broker.delete(queue)
        held.close()
        store.drop()
        store.close()
