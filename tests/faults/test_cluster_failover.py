"""A Redis Cluster master dies while the schedulers release from it: its replica is promoted and
no job is lost.

The store is split into shards over the cluster's masters and opened with ``wait_replicas=1``,
so every accept, claim and mark the master acknowledged is on its replica too (without it,
Redis replication is asynchronous and a failover can lose the last acknowledged writes: see the
README, "Redis Cluster"). One ``DelayedJobScheduler`` per shard releases, as a sharded
``SchedulerService`` runs them; the master of a shard holding due jobs is killed part-way, its
replica takes over, and the killed node is started again (it rejoins as the new master's replica:
until then that shard has no replica, so with ``wait_replicas=1`` its writes are refused as
unavailable and the scheduler retries them: safety before availability).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, DelayedJobScheduler, Settings
from parallel_scheduler.delayed.paths import CHUNK
from storage_adapters import JobState, NewJob, shard_of, shards_of

SHARDS = 4
JOBS = 4000
PARALLELISM = 4


class SlowRecorder:
    """Records every dispatch; each takes a little while, like a broker round trip, so the
    release is still going when the master dies."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.guard = threading.Lock()

    def __call__(self, task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
        time.sleep(0.0005)
        with self.guard:
            self.sent.append(job_id)


@pytest.mark.slow
@pytest.mark.redis_cluster
def test_a_masters_death_mid_release_loses_no_job(own_redis_cluster: Any) -> None:
    url = own_redis_cluster.url + "?wait_replicas=1&wait_timeout_ms=5000"
    store = storage_adapters.from_url(url, prefix="ps_fo", shards=SHARDS)
    store.setup()
    recorder = SlowRecorder()
    settings = Settings(
        max_degree_of_parallelism=PARALLELISM,
        lock_lease=3.0,
        poll_interval=0.1,
        retention=None,
    )
    schedulers = [
        DelayedJobScheduler(shard, CallableDispatcher(recorder), settings, owner=f"s{k}")
        for k, shard in enumerate(shards_of(store))
    ]
    threads: list[threading.Thread] = []
    try:
        # Given 4,000 jobs due now, spread over 4 shards on the cluster's masters
        now = store.now()
        ids = [f"job-{i}" for i in range(JOBS)]
        for start in range(0, JOBS, 500):
            chunk = ids[start : start + 500]
            store.add_jobs([NewJob(i, "tasks.t", "{}", now - 1) for i in chunk])
        per_shard = Counter(shard_of(i, SHARDS) for i in ids)
        victim = max(per_shard, key=lambda k: per_shard[k])
        # When the schedulers release, and the master of the busiest shard dies part-way
        for scheduler in schedulers:
            thread = threading.Thread(
                target=scheduler.run_forever, kwargs={"install_signal_handlers": False}
            )
            thread.start()
            threads.append(thread)
        wait_until(lambda: len(recorder.sent) >= JOBS // 4, timeout=60)
        tag = "{" + storage_adapters.sharding.shard_prefix("ps_fo", victim) + "}"
        old_port, _ = own_redis_cluster.kill_master_of(tag)
        own_redis_cluster.wait_for_master_change(tag, old_port)
        # (the promoted master has no replica: with wait_replicas=1 its shard's writes are
        # refused, as unavailable, until the old master is back as its replica)
        own_redis_cluster.restart(old_port)
        # Then every job is dispatched, and Enqueued in storage: none lost
        wait_until(lambda: set(recorder.sent) >= set(ids), timeout=90, interval=0.2)

        def all_enqueued() -> bool:
            try:
                return store.count_by_state()[JobState.ENQUEUED] == JOBS
            except storage_adapters.StorageUnavailableError:
                return False

        wait_until(all_enqueued, timeout=60, interval=0.2)
        # And only jobs in flight at the death can have gone twice: at most a chunk per thread
        duplicates = len(recorder.sent) - len(set(recorder.sent))
        assert set(recorder.sent) == set(ids)
        assert duplicates <= PARALLELISM * CHUNK, duplicates
        print(f"cluster failover mid-release: {JOBS} jobs, 0 lost, {duplicates} duplicated")
    finally:
        for scheduler in schedulers:
            scheduler.stop()
        for thread in threads:
            thread.join(timeout=30)
        for scheduler in schedulers:
            scheduler.close()
        store.close()
