"""Unique jobs raced through ``Client`` on a sharded store (issue 25, item 3): clients of their
own (each with its own connections; in threads, and in processes), released together by a
barrier, schedule the same
``(task, unique_key)`` on 8 shards of PostgreSQL, Redis and a Redis Cluster. With ``keep``
exactly one call creates the job and every other answer names it (``created=False``); with
``replace`` exactly one job remains, holding one caller's due time and payload together (never
a mix), and a later replace wins whole. Every wait has a deadline."""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Client
from parallel_scheduler.client import ScheduleResult
from tests.conftest import storage_url, unique_prefix
from tests.shard_stores import drop_shards

SHARDS = 8
RACERS = 8
DEADLINE = 60.0
TASK, KEY = "billing.remind", "invoice-42"


@pytest.fixture(
    params=[
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=pytest.mark.redis_cluster),
    ]
)
def sharded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The URL and a new prefix of an 8-shard store, set up; every shard dropped afterwards."""
    url, prefix = storage_url(str(request.param), tmp_path), unique_prefix()
    with Client(storage_url=url, prefix=prefix, shards=SHARDS) as first:
        first.setup()
    yield url, prefix
    drop_shards(url, prefix, SHARDS)


def _race(url: str, prefix: str, on_conflict: Any, base: datetime) -> list[ScheduleResult]:
    """``RACERS`` clients, opened before the barrier, each scheduling ``[i]`` due at ``base + i``
    minutes the moment the barrier lets them all go."""
    clients = [Client(storage_url=url, prefix=prefix, shards=SHARDS) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS, timeout=DEADLINE)
    results: list[ScheduleResult | BaseException | None] = [None] * RACERS

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = clients[i].schedule(
                TASK, [i], eta=base + timedelta(minutes=i), unique_key=KEY, on_conflict=on_conflict
            )
        except BaseException as exc:  # reported below, with the racer's number
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(RACERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE)
            assert not thread.is_alive(), "a racer did not finish within the deadline"
    finally:
        for client in clients:
            client.close()
    for i, result in enumerate(results):
        assert isinstance(result, ScheduleResult), (i, result)
    return [result for result in results if isinstance(result, ScheduleResult)]


def _stored(url: str, prefix: str) -> tuple[int, Any]:
    """How many jobs the store holds in all, and the one holding the key."""
    with Client(storage_url=url, prefix=prefix, shards=SHARDS) as reader:
        total = sum(reader.storage.count_by_state().values())
        jobs = [job for job in reader.list(limit=100) if job.unique_key == KEY]
    assert len(jobs) == 1, jobs
    return total, jobs[0]


def test_keep_one_creates_and_every_other_gets_its_id(sharded: tuple[str, str]) -> None:
    url, prefix = sharded
    base = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
    results = _race(url, prefix, "keep", base)
    created = [result for result in results if result.created]
    assert len(created) == 1
    winner = created[0]
    assert {result.job_id for result in results} == {winner.job_id}
    assert not any(result.replaced for result in results)
    total, job = _stored(url, prefix)
    assert total == 1 and job.id == winner.job_id
    i = job.args[0]
    assert job.due_at == base + timedelta(minutes=i)  # the creator's, untouched
    assert all(r.due_at == job.due_at for r in results if not r.created)


def test_replace_leaves_one_job_with_one_callers_time_and_payload(
    sharded: tuple[str, str],
) -> None:
    url, prefix = sharded
    base = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
    results = _race(url, prefix, "replace", base)
    assert sum(result.created for result in results) == 1
    holder = {result.job_id for result in results}
    assert len(holder) == 1
    assert all(result.replaced for result in results if not result.created)
    total, job = _stored(url, prefix)
    assert total == 1 and {job.id} == holder
    i = job.args[0]
    assert job.due_at == base + timedelta(minutes=i)  # time and payload of one and the same call
    with Client(storage_url=url, prefix=prefix, shards=SHARDS) as last:
        late = last.schedule(
            TASK, ["last"], eta=base - timedelta(minutes=5), unique_key=KEY, on_conflict="replace"
        )
    assert (late.job_id, late.created, late.replaced) == (job.id, False, True)
    total, job = _stored(url, prefix)
    assert total == 1 and job.args == ["last"] and job.due_at == base - timedelta(minutes=5)


def _racer(url: str, prefix: str, i: int, barrier: Any, answers: Any) -> None:
    """One process's call: open a client, wait for the others, schedule, report the answer (or
    the error) on ``answers``."""
    try:
        with Client(storage_url=url, prefix=prefix, shards=SHARDS) as client:
            barrier.wait()
            result = client.schedule(TASK, [i], countdown=3600 + i, unique_key=KEY)
        answers.put((i, result.job_id, result.created, result.replaced))
    except BaseException as exc:  # reported by the test, with the racer's number
        answers.put((i, repr(exc), None, None))


def test_keep_across_processes(sharded: tuple[str, str]) -> None:
    url, prefix = sharded
    context = multiprocessing.get_context("spawn")
    racers = 4
    barrier = context.Barrier(racers, timeout=DEADLINE)
    answers = context.Queue()
    processes = [
        context.Process(target=_racer, args=(url, prefix, i, barrier, answers), daemon=True)
        for i in range(racers)
    ]
    for process in processes:
        process.start()
    try:
        got = []
        for _ in range(racers):
            try:
                got.append(answers.get(timeout=DEADLINE))
            except queue.Empty:
                pytest.fail(f"only {len(got)} of {racers} racers answered within the deadline")
        for process in processes:
            process.join(DEADLINE)
            assert process.exitcode == 0, process.exitcode
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
    assert all(created is not None for _, _, created, _ in got), got
    assert sum(bool(created) for _, _, created, _ in got) == 1, got
    assert len({job_id for _, job_id, _, _ in got}) == 1 and not any(r for *_, r in got)
    total, job = _stored(url, prefix)
    assert total == 1 and job.id == got[0][1]
