"""The hardware's raw limits the project's paths are measured against: the least work that does
the same thing on the same servers, written minimal on purpose, and checked like the paths.

- **Redis release**: one Lua script per batch moves due jobs from a sorted set and their hashes
  onto the broker list (``ZRANGEBYSCORE … LIMIT``, ``HGET`` of each ready message, one ``LPUSH``,
  ``HSET`` of the state, one ``ZREM``).
- **PostgreSQL release**: one set-based ``UPDATE … WHERE id IN (SELECT … ORDER BY due_at LIMIT n
  FOR UPDATE SKIP LOCKED) RETURNING id, payload`` per batch on the project's own table (a fresh
  prefix), the returned messages pushed to the Redis broker list in one ``LPUSH`` before the
  commit, so the limit includes the same broker hop.
- **Accept**: one ``INSERT`` and commit per job, ``executemany`` or ``COPY`` of ``per_call``
  rows per transaction (PostgreSQL, the project's table); one ``EVALSHA`` per job, or one script
  per ``per_call`` jobs (Redis, ``HSET`` + ``ZADD`` per job, with the message when asked).

What a raw release moves is each job's finished Celery message (the one the project's publisher
builds, made before the clock starts), so the broker receives what it receives from the project
and the same oracle reads it back: the limit does no serialisation at all. Each function returns
``(jobs/s, CPU ms of this process per 1,000 jobs)`` and raises ``CheckFailed`` unless every job
arrived exactly once and nothing is left due; its keys, rows and list are removed afterwards.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import redis

import storage_adapters
from benchmarks.harness.brokers import queued_ids
from benchmarks.harness.release_runs import (
    CheckFailed,
    cpu_seconds,
    expect_each_once,
    remove_queue,
    run_prefix,
)
from parallel_scheduler import JobState
from parallel_scheduler.delayed.envelopes import decode_envelope
from parallel_scheduler.jobs import JobSpec
from storage_adapters import NewJob, Storage

__all__ = [
    "pg_accept",
    "pg_release",
    "redis_accept",
    "redis_messages",
    "redis_release",
    "timed",
]

Messages = Sequence[tuple[str, str]]  # (job id, finished broker message)

_RELEASE_LUA = """
local t = redis.call('TIME')
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t[1] + t[2] / 1000000,
  'LIMIT', 0, ARGV[2])
if #ids == 0 then return 0 end
local messages = {}
for i, id in ipairs(ids) do
  local key = ARGV[1] .. id
  messages[i] = redis.call('HGET', key, 'message')
  redis.call('HSET', key, 'state', 'enqueued')
end
for first = 1, #ids, 1000 do  -- unpack() is bounded by Lua's C stack
  local last = math.min(first + 999, #ids)
  redis.call('LPUSH', KEYS[2], unpack(messages, first, last))
  redis.call('ZREM', KEYS[1], unpack(ids, first, last))
end
return #ids
"""
# ARGV: job key prefix, then id, payload, due_at, message ('' for none) per job
_ACCEPT_LUA = """
for i = 2, #ARGV, 4 do
  local key = ARGV[1] .. ARGV[i]
  redis.call('HSET', key, 'payload', ARGV[i + 1], 'state', 'scheduled')
  if ARGV[i + 3] ~= '' then redis.call('HSET', key, 'message', ARGV[i + 3]) end
  redis.call('ZADD', KEYS[1], ARGV[i + 2], ARGV[i])
end
return (#ARGV - 1) / 4
"""


def timed(work: Callable[[], None], jobs: int) -> tuple[float, float]:
    """``(jobs/s, CPU ms of this process per 1,000 jobs)`` of one call of ``work``."""
    started, cpu = time.perf_counter(), cpu_seconds()
    work()
    elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    return jobs / elapsed, cpu * 1e6 / jobs


def redis_messages(url: str, queue: str, specs: Sequence[JobSpec]) -> list[tuple[str, str]]:
    """``(id, message)`` per job: the message the project's Redis publisher pushes for it."""
    from benchmarks.harness.celery_apps import build_celery_app
    from parallel_scheduler.celery.publish.redis_lists import RedisPublisher

    app = build_celery_app(url, queue, task="noop", isolated=False, name="bench")
    try:
        publisher, now, made = RedisPublisher(app), time.time(), []
        for spec in specs:
            envelope = publisher.envelope(spec.encode(now - 1))
            if envelope is None:
                raise CheckFailed(f"the Redis publisher builds no message for {spec.id}")
            made.append((str(spec.id), decode_envelope(envelope)[1]))
        return made
    finally:
        app.close()


# -- Redis ---------------------------------------------------------------------------------------


@contextmanager
def _redis_keys(url: str) -> Iterator[tuple[redis.Redis, str]]:
    """A client and a fresh key prefix whose keys are all deleted afterwards."""
    client = redis.Redis.from_url(url)
    prefix = run_prefix("benchraw") + ":"
    try:
        yield client, prefix
    finally:
        for keys in _chunks(list(client.scan_iter(match=f"{prefix}*", count=10_000)), 1000):
            client.unlink(*keys)
        client.close()


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for first in range(0, len(items), size):
        yield items[first : first + size]


def redis_release(url: str, queue: str, messages: Messages, batch: int) -> tuple[float, float]:
    """Due hashes -> the broker list ``queue`` on the same server, one script per ``batch``."""
    with _redis_keys(url) as (client, prefix):
        due, now = f"{prefix}due", time.time() - 1
        for chunk in _chunks(messages, 1000):
            pipe = client.pipeline(transaction=False)
            for job_id, message in chunk:
                pipe.hset(f"{prefix}j:{job_id}", mapping={"message": message, "state": "due"})
            pipe.zadd(due, {job_id: now for job_id, _ in chunk})
            pipe.execute()
        script = client.register_script(_RELEASE_LUA)

        def release() -> None:
            while script(keys=[due, queue], args=[f"{prefix}j:", batch]):
                pass

        try:
            figures = timed(release, len(messages))
            if client.zcard(due):
                raise CheckFailed(f"raw Redis release: {client.zcard(due)} jobs left due")
            expect_each_once("raw Redis release", queued_ids(client, queue), len(messages))
            return figures
        finally:
            remove_queue(url, queue)


def redis_accept(
    url: str, jobs: Sequence[NewJob], messages: Messages | None, per_call: int
) -> tuple[float, float]:
    """``HSET`` + ``ZADD`` per job, ``per_call`` jobs per script (1: one ``EVALSHA`` per job);
    with ``messages``, each job's broker message is stored too (accept-time messages)."""
    extra = dict(messages or ())
    with _redis_keys(url) as (client, prefix):
        script = client.register_script(_ACCEPT_LUA)
        calls = [
            [f"{prefix}j:"]
            + [v for job in chunk for v in (job.id, job.payload, job.due_at, extra.get(job.id, ""))]
            for chunk in _chunks(jobs, per_call)
        ]
        due = f"{prefix}due"

        def accept() -> None:
            for args in calls:
                script(keys=[due], args=args)

        figures = timed(accept, len(jobs))
        members = client.zrange(due, 0, -1)
        stored = {m.decode() if isinstance(m, bytes) else str(m) for m in members}
        if stored != {job.id for job in jobs}:
            raise CheckFailed(f"raw Redis accept: {len(stored)} of {len(jobs)} jobs stored")
        return figures


# -- PostgreSQL ----------------------------------------------------------------------------------


def _psycopg_url(storage_url: str) -> str:
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", storage_url)


_COLUMNS = "id, task, payload, due_at, state, attempts, created_at, updated_at"


def _rows(jobs: Sequence[NewJob], payloads: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    now = time.time()
    return [
        (job.id, job.task, (payloads or {}).get(job.id, job.payload), job.due_at, "scheduled", 0,
         now, now)
        for job in jobs
    ]  # fmt: skip


@contextmanager
def _pg_table(storage_url: str) -> Iterator[tuple[Storage, psycopg.Connection[Any], str]]:
    """The project's jobs table under a fresh prefix (dropped afterwards), and a connection."""
    prefix = run_prefix("benchraw")
    storage = storage_adapters.from_url(storage_url, prefix=prefix, pool_size=1)
    storage.setup()
    try:
        with psycopg.connect(_psycopg_url(storage_url)) as conn:
            yield storage, conn, f"{prefix}_jobs"
    finally:
        storage.drop()
        storage.close()


def _expect_stored(what: str, storage: Storage, state: JobState, jobs: int) -> None:
    counts = storage.count_by_state()
    if counts[state] != jobs or sum(counts.values()) != jobs:
        raise CheckFailed(f"{what}: storage holds {dict(counts)}, expected {jobs} {state.value}")


def pg_accept(storage_url: str, jobs: Sequence[NewJob], how: str) -> tuple[float, float]:
    """``how``: ``single`` (one ``INSERT`` and commit per job), ``executemany`` or ``copy``
    (1,000 rows per statement and commit)."""
    with _pg_table(storage_url) as (storage, conn, table):
        insert = f"INSERT INTO {table} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        rows = _rows(jobs)
        cur = conn.cursor()

        def accept() -> None:
            if how == "single":
                for row in rows:
                    cur.execute(insert, row)
                    conn.commit()
                return
            for chunk in _chunks(rows, 1000):
                if how == "executemany":
                    cur.executemany(insert, chunk)
                else:
                    with cur.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN") as copy:
                        for row in chunk:
                            copy.write_row(row)
                conn.commit()

        figures = timed(accept, len(jobs))
        _expect_stored(f"raw PostgreSQL accept ({how})", storage, JobState.SCHEDULED, len(jobs))
        return figures


def pg_release(
    storage_url: str,
    broker_url: str,
    queue: str,
    jobs: Sequence[NewJob],
    messages: Messages,
    batch: int,
) -> tuple[float, float]:
    """Set-based claim of ``batch`` due rows, their messages ``LPUSH``-ed, commit; repeated."""
    with _pg_table(storage_url) as (storage, conn, table):
        with conn.cursor().copy(f"COPY {table} ({_COLUMNS}) FROM STDIN") as copy:
            for row in _rows(jobs, dict(messages)):
                copy.write_row(row)
        conn.commit()
        broker = redis.Redis.from_url(broker_url)
        claim = (
            f"UPDATE {table} SET state = 'enqueued', attempts = attempts + 1, updated_at = %s "
            f"WHERE id IN (SELECT id FROM {table} WHERE state = 'scheduled' AND due_at <= %s "
            f"ORDER BY due_at LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, payload"
        )
        cur = conn.cursor()

        def release() -> None:
            while True:
                now = time.time()
                rows = cur.execute(claim, (now, now, batch)).fetchall()
                if rows:
                    broker.lpush(queue, *[payload for _, payload in rows])
                conn.commit()
                if len(rows) < batch:
                    return

        try:
            figures = timed(release, len(jobs))
            _expect_stored("raw PostgreSQL release", storage, JobState.ENQUEUED, len(jobs))
            expect_each_once("raw PostgreSQL release", queued_ids(broker, queue), len(jobs))
            return figures
        finally:
            remove_queue(broker_url, queue)
            broker.close()
