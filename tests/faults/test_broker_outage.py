"""The broker is unreachable for 30 s while jobs fall due: they stay Scheduled (none is marked
Enqueued without having been sent), and once the broker is back every one is released and run
by a real ``celery worker`` exactly once."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable

import pytest
import redis as redis_client

from devtools.processes import ChildProcess
from devtools.scheduler_process import run_command
from devtools.servers import RedisServer, Server
from devtools.waiting import wait_until
from storage_adapters import JobState, Storage, list_jobs
from tests.celery_apps import worker_command
from tests.conftest import unique_prefix
from tests.faults.harness import Tally, add_jobs, counts

pytestmark = [pytest.mark.slow, pytest.mark.celery, pytest.mark.postgresql, pytest.mark.redis]

OUTAGE = 30.0  # the 30 s
BEFORE = 100  # released and run before the outage: the pipeline works
DURING = 400  # falling due while the broker is down
POLL = 0.2


def test_broker_outage_keeps_jobs_scheduled_until_it_returns(
    postgres: Server,
    redis: Server,
    broker_server: RedisServer,
    open_storage: Callable[[str, str], Storage],
    spawn_command: Callable[..., ChildProcess],
) -> None:
    prefix = unique_prefix()
    storage = open_storage(postgres.url, prefix)
    run = uuid.uuid4().hex[:10]
    queue, key = f"faults-{run}", f"faults:{run}:executed"
    records = redis_client.Redis.from_url(redis.url, decode_responses=True)
    payload = json.dumps({"args": [], "kwargs": {}, "options": {"queue": queue}})
    env = dict(
        os.environ,
        FAULTS_BROKER_URL=broker_server.url,
        FAULTS_RECORD_URL=redis.url,
        FAULTS_RECORD_KEY=key,
    )
    # Given a real worker and the scheduler command, both on the test's own broker
    worker = spawn_command(
        "worker",
        worker_command("tests.faults.worker_app", queue, f"faults-{run}"),
        env,
    )  # fmt: skip
    scheduler = spawn_command(
        "scheduler",
        run_command(
            postgres.url, prefix, broker_url=broker_server.url, poll_interval=POLL,
            lock_lease=5, max_degree_of_parallelism=4,
        ),
    )  # fmt: skip
    wait_until(lambda: records.llen(key + ":ready") or not worker.alive(), timeout=60)
    assert worker.alive(), worker.log()[-3000:]

    def executed() -> Counter[str]:
        return Counter(str(raw) for raw in records.lrange(key, 0, -1))

    before = [f"before-{i}" for i in range(BEFORE)]
    add_jobs(storage, before, storage.now() - 1, payload)
    wait_until(lambda: len(executed()) == BEFORE, timeout=60)
    # When the broker goes away, and jobs fall due during the outage
    broker_server.stop(save=False)
    down_at = time.monotonic()
    during = [f"during-{i}" for i in range(DURING)]
    now = storage.now()
    add_jobs(storage, during, [now + 3.0 * i / DURING for i in range(DURING)], payload)
    samples = 0
    while time.monotonic() - down_at < OUTAGE:
        # Then nothing is marked Enqueued that the broker did not take
        state = counts(storage)
        assert state[JobState.ENQUEUED] == BEFORE, state
        assert state[JobState.SCHEDULED] + state[JobState.CLAIMED] == DURING, state
        samples += 1
        time.sleep(0.5)  # a sampling period over a fixed outage, not a wait for a condition
    # (a job given back may be claimed again by a pass running right now: look in both states)
    given_back = [
        job for job in list_jobs(storage, None, limit=BEFORE + DURING)
        if job.state in (JobState.SCHEDULED, JobState.CLAIMED)
        and job.last_error and "dispatch failed" in job.last_error
    ]  # fmt: skip
    assert given_back, "the scheduler never tried to send during the outage"
    attempts = max(job.attempts for job in given_back)
    # When the broker returns, every job is released and run once
    broker_server.start()
    back_at = time.monotonic()
    # (the scheduler's back-off between failing passes grows to one lock lease, and Celery's
    # worker retries its connection every 2, 4, 6, ... s: both decide how soon this happens)
    wait_until(lambda: counts(storage)[JobState.ENQUEUED] == BEFORE + DURING, timeout=90)
    released_in = time.monotonic() - back_at
    wait_until(lambda: len(executed()) == BEFORE + DURING, timeout=90)
    run_in = time.monotonic() - back_at
    broker = redis_client.Redis.from_url(broker_server.url)
    wait_until(lambda: broker.llen(queue) == 0, timeout=30)  # nothing left to run twice
    runs = executed()
    tally = Tally.count(
        f"broker (Redis) down {OUTAGE:.0f} s", before + during, runs.elements(), storage,
        released_s_after_return=round(released_in, 1), run_s_after_return=round(run_in, 1),
        gave_back_with_error=len(given_back), max_attempts=attempts, samples=samples,
    )  # fmt: skip
    tally.report()
    assert scheduler.alive(), scheduler.log()[-3000:]
    assert tally.lost == 0 and tally.duplicated == 0
    assert runs == Counter(before + during)
    records.delete(key, key + ":ready")
