"""Recurring ticks straight to the broker: with Redis storage on the Redis server of a Redis-list
broker (messages built at accept, the defaults), ``parallel-scheduler run`` pushes each due
firing onto its queue in the step that fires it; with PostgreSQL storage the firing step sends
each due firing in its own transaction (``TransactionalFiringStorage``). Either way the release
pass finds nothing left; with three racing scheduler processes, one killed with SIGKILL
mid-window, every tick of the window still reaches the broker, exactly once from Redis (one
script) and at least once from PostgreSQL, whose storage holds each tick once and whose only
repeats are the firings a killed process had sent before its transaction committed."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import redis

from devtools.waiting import wait_until
from parallel_scheduler import Client
from storage_adapters import JobState, Storage, from_url
from storage_adapters.sql.postgresql import PostgreSQLStorage
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server, unique_prefix

pytestmark = [pytest.mark.slow]

COMMAND = str(Path(sys.executable).with_name("parallel-scheduler"))
#: A broker database no other test uses, on the storage's own server.
BROKER_URL = REDIS_URL.rsplit("/", 1)[0] + "/4"


STORES = {"redis": REDIS_URL, "postgresql": POSTGRESQL_URL}
#: Firings one killed PostgreSQL scheduler may have sent and not committed: a chunk's.
CHUNK = 200


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgresql", marks=pytest.mark.postgresql),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[tuple[str, Storage]]:
    require_server(request.param)
    prefix = unique_prefix()
    storage = from_url(STORES[request.param], prefix=prefix)
    storage.setup()
    yield prefix, storage
    storage.drop()
    storage.close()


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"fire-{uuid.uuid4().hex[:10]}"
    yield name
    redis.Redis.from_url(BROKER_URL).delete(name)


def run_args(prefix: str, storage: Storage) -> list[str]:
    url = POSTGRESQL_URL if isinstance(storage, PostgreSQLStorage) else REDIS_URL
    return [
        *(COMMAND, "--storage-url", url, "--prefix", prefix, "--log-level", "WARNING"),
        *("run", "--broker-url", BROKER_URL, "--poll-interval", "0.2"),
    ]


def in_broker(queue: str) -> Counter[str]:
    """The job ids of the messages on ``queue``, counted."""
    messages = redis.Redis.from_url(BROKER_URL).lrange(queue, 0, -1)
    return Counter(json.loads(m)["headers"]["id"] for m in messages)


def utc_id(recurring_id: str, tick: int) -> str:
    stamp = datetime.fromtimestamp(tick, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{recurring_id}@{stamp}"


def test_a_due_tick_reaches_the_broker_in_the_firing_step(
    store: tuple[str, Storage], queue: str
) -> None:
    prefix, storage = store
    # Given 50 recurring jobs whose first tick is a moment away
    start = math.ceil(storage.now()) + 1
    begin = datetime.fromtimestamp(start, timezone.utc)
    client = Client(storage=storage)
    client.recurring.save_many(
        [
            {"id": f"r{n}", "task": "t.tick", "every": 3600, "start": begin, "queue": queue}
            for n in range(50)
        ]
    )
    wait_until(lambda: storage.now() >= start, timeout=10, interval=0.05)
    # When one pass of each scheduler runs
    out = subprocess.run(
        [*run_args(prefix, storage), "--once"], check=True, capture_output=True, text=True
    ).stdout
    report = json.loads(out[out.index("{") :])
    # Then the firing step sent every tick: the release pass found none left to send
    assert report["recurring"]["created"] == 50
    assert report["delayed"]["released"] == 0
    expected = Counter(utc_id(f"r{n}", start) for n in range(50))
    assert in_broker(queue) == expected
    assert storage.count_by_state()[JobState.ENQUEUED] == 50
    assert storage.count_by_state()[JobState.SCHEDULED] == 0


def test_a_jittered_tick_waits_in_storage_until_its_moved_due_time(
    store: tuple[str, Storage], queue: str
) -> None:
    prefix, storage = store
    # Given 50 recurring jobs with an hour of jitter whose first tick is a moment away
    start = math.ceil(storage.now()) + 1
    begin = datetime.fromtimestamp(start, timezone.utc)
    client = Client(storage=storage)
    client.recurring.save_many(
        [
            {"id": f"r{n}", "task": "t.tick", "every": 7200, "start": begin, "queue": queue,
             "jitter": 3600}
            for n in range(50)
        ]
    )  # fmt: skip
    wait_until(lambda: storage.now() >= start, timeout=10, interval=0.05)
    # When one pass of each scheduler runs
    out = subprocess.run(
        [*run_args(prefix, storage), "--once"], check=True, capture_output=True, text=True
    ).stdout
    report = json.loads(out[out.index("{") :])
    # Then every tick fired, and only the firings whose moved due time has come were sent; the
    # others wait, Scheduled, due within the hour after the tick
    assert report["recurring"]["created"] == 50
    sent = in_broker(queue)
    now = storage.now()
    waiting = 0
    for n in range(50):
        job = storage.get_job(utc_id(f"r{n}", start))
        assert job is not None and start <= job.due_at < start + 3600
        if job.state is JobState.SCHEDULED:
            assert sent[job.id] == 0
            waiting += 1
        else:
            assert job.due_at <= now and sent[job.id] == 1
    assert waiting >= 40  # an hour of jitter: almost all are still ahead


def test_racing_schedulers_and_a_kill_send_every_tick_once(
    store: tuple[str, Storage], queue: str, tmp_path: Path
) -> None:
    prefix, storage = store
    # Given three scheduler processes on one store
    processes = [
        subprocess.Popen(
            run_args(prefix, storage),
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"s{n}.log").open("wb"),
        )
        for n in range(3)
    ]
    try:
        # and 20 recurring jobs firing every second through a 6-second window
        start = math.ceil(storage.now()) + 2
        end = start + 6
        begin = datetime.fromtimestamp(start, timezone.utc)
        finish = datetime.fromtimestamp(end, timezone.utc)
        client = Client(storage=storage)
        client.recurring.save_many(
            [
                {"id": f"e{n}", "task": "t.tick", "every": 1, "start": begin, "end": finish}
                | {"queue": queue}
                for n in range(20)
            ]
        )
        expected = Counter(utc_id(f"e{n}", t) for n in range(20) for t in range(start, end + 1))
        # When one of them is killed with SIGKILL in the middle of the window
        wait_until(lambda: storage.now() >= start + 3, timeout=20, interval=0.05)
        processes[0].send_signal(signal.SIGKILL)
        processes[0].wait(10)

        # Then every tick of the window reaches the broker exactly once, and nothing else does
        # (done: every recurring job is past its end, and nothing is left to send)
        def done() -> bool:
            counts = storage.count_by_state()
            idle = counts[JobState.SCHEDULED] == counts[JobState.CLAIMED] == 0
            return storage.next_recurring_at() is None and idle

        wait_until(done, timeout=60)
        sent = in_broker(queue)
        assert storage.count_by_state()[JobState.ENQUEUED] == len(expected)
        if isinstance(storage, PostgreSQLStorage):
            assert set(sent) == set(expected)
            assert sent.total() - len(expected) <= CHUNK
        else:
            assert sent == expected
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            process.wait(30)
