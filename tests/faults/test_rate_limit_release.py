"""A global rate limit at release (issue 25, section 2): three scheduler processes (the product's
``SchedulerService``, as ``parallel-scheduler run`` runs it) over one store, a limit of 50 jobs a
second on one queue, and 600 of its jobs due at once beside 200 jobs of a queue without a limit;
5,000 of them, as the issue asks, on PostgreSQL and on an 8-shard Redis Cluster (100 s of
releases each). Every one is marked ``alone``: ``make test`` runs them after the parallel suite,
one at a time, so that a second's count measures the release and not a neighbouring test's load
(beside the suite, a second once released 46).

The oracle is the limit's own arithmetic, not the code under test: after a burst of ``BURST``
jobs, at most ``RATE`` jobs a second in total, so by any instant ``t`` at most
``BURST + RATE * (t - let_go)`` have gone, ``let_go`` being when the schedulers were started
(a stall can only lower that count); and since every job waits for its slot and the release
runs freely otherwise, every whole second after the first releases between 47 and 53 of them.
The other queue's jobs are not held back: they all go before the limited queue is a quarter
through. On every adapter, without shards, and split into 8 shards on PostgreSQL and a Redis
Cluster (one budget for every shard).
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import storage_adapters
from devtools.scheduler_process import read_dispatches
from devtools.waiting import wait_until
from storage_adapters import JobState, NewJob, PauseKind, Storage
from tests.conftest import made_by, storage_url, unique_prefix
from tests.faults.harness import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.alone]

RATE = 50
BURST = 5
LIMITED = 600  # 12 s at 50 a second
FULL = 5000  # the count: 100 s at 50 a second
FREE = 200
PROCESSES = 3


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """Start service processes; every one still alive at the end is killed by its pid."""
    yield from made_by(functools.partial(ServiceProcess, tmp_path), ServiceProcess.end)


STORES = [
    pytest.param(("sqlite", 1, LIMITED), id="sqlite"),
    pytest.param(("postgresql", 1, LIMITED), id="postgresql", marks=pytest.mark.postgresql),
    pytest.param(("redis", 1, LIMITED), id="redis", marks=pytest.mark.redis),
    pytest.param(
        ("postgresql", 8, LIMITED), id="postgresql-8-shards", marks=pytest.mark.postgresql
    ),
    pytest.param(
        ("redis-cluster", 8, LIMITED), id="redis-cluster-8-shards", marks=pytest.mark.redis_cluster
    ),
    pytest.param(
        ("postgresql", 1, FULL),
        id="postgresql-5000",
        marks=[pytest.mark.postgresql, pytest.mark.timeout(600)],
    ),
    pytest.param(
        ("redis-cluster", 8, FULL),
        id="redis-cluster-8-shards-5000",
        marks=[pytest.mark.redis_cluster, pytest.mark.timeout(600)],
    ),
]


@pytest.fixture(params=STORES)
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str, int, int, Storage]]:
    """(URL, prefix, shards, limited jobs, the store), dropped at the end."""
    kind, shards, limited = request.param
    url = storage_url(kind, tmp_path)
    prefix = unique_prefix()
    opened = storage_adapters.from_url(url, prefix=prefix, shards=shards, pool_size=4)
    opened.setup()
    yield url, prefix, shards, limited, opened
    opened.drop()
    opened.close()


def add_due(storage: Storage, queue: str, count: int) -> list[str]:
    now = storage.now()
    jobs = [
        NewJob(f"{queue}-{i:04d}", "tasks.t", "{}", now - 1 + i * 1e-4, queue=queue)
        for i in range(count)
    ]
    for first in range(0, count, 1000):
        storage.add_jobs(jobs[first : first + 1000])
    return [job.id for job in jobs]


def test_three_schedulers_release_a_limited_queue_at_its_rate_and_the_rest_at_once(
    store: tuple[str, str, int, int, Storage], spawn: Callable[..., ServiceProcess], tmp_path: Path
) -> None:
    url, prefix, shards, limited_count, storage = store
    # Given a limit of 50 a second (burst 5) on queue "limited", stored before the schedulers run
    storage.set_rate_limit(PauseKind.QUEUE, "limited", RATE, 1.0, BURST, "test")
    # And three scheduler processes, started together once 600 (or 5,000) limited and 200 free
    # jobs are due
    start = tmp_path / "go"
    processes = [
        spawn(f"s{n}", url, prefix, shards, start_file=str(start)) for n in range(PROCESSES)
    ]
    limited = add_due(storage, "limited", limited_count)
    free = add_due(storage, "free", FREE)
    let_go = time.time()  # no slot can be reserved before the schedulers start
    start.touch()
    for process in processes:
        process.wait_ready()
    # When they have released every job
    records = [process.record for process in processes]
    everything = limited_count + FREE
    wait_until(
        lambda: len(read_dispatches(records)) >= everything, timeout=limited_count / RATE * 4
    )
    dispatches = read_dispatches(records)
    # Then each job went exactly once, and storage says Enqueued for all of them
    assert Counter(d.job_id for d in dispatches) == Counter(limited + free)
    assert storage.count_by_state()[JobState.ENQUEUED] == everything
    times = sorted(d.at for d in dispatches if d.job_id.startswith("limited-"))
    t0 = times[0]
    # And never more than the budget allows: by any instant, the burst and the rate times the
    # time since the schedulers were let go (a job goes at its slot or later, never earlier)
    for gone, at in enumerate(times, start=1):
        assert gone <= BURST + RATE * (at - let_go), (gone, at - let_go)
    # And every whole second after the first released 47-53 of them
    seconds = Counter(int(at - t0) for at in times)
    whole = range(1, int(times[-1] - t0))
    per_second = [seconds[s] for s in whole]
    assert len(per_second) >= limited_count // RATE - 2, per_second
    assert all(47 <= count <= 53 for count in per_second), per_second
    # And the free queue was not held back: all of it went before a quarter of the limited one
    free_last = max(d.at for d in dispatches if d.job_id.startswith("free-"))
    quarter = times[limited_count // 4]
    assert free_last < quarter, (free_last - t0, quarter - t0)
    # And the processes shared the release (every one of them is alive and served)
    for process in processes:
        assert process.alive(), process.log()
    summary = {
        "per_second": per_second,
        "jobs": limited_count,
        "shards": shards,
        "by": Counter(d.by for d in dispatches),
    }
    print(json.dumps(summary, default=str))
