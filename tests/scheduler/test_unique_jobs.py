"""Unique jobs through the ``Client`` (issue 25, item 3), on every adapter: a second call with a
held key keeps the holder (its id, ``created=False``, its stored due time) or replaces its due
time and payload; the key is freed when the holder is cancelled; with shards, a generated id
lands in its key's shard; plain and unique specs mix in one ``schedule_many``."""

from __future__ import annotations

from datetime import timedelta

from parallel_scheduler import Client, JobSpec, JobState
from parallel_scheduler.jobs import decode_payload
from storage_adapters import Storage
from storage_adapters.shard_guard import shards_of
from storage_adapters.sharding import shard_of, unique_shard


def test_a_held_key_keeps_its_job_by_default(storage: Storage) -> None:
    client = Client(storage)
    first = client.schedule("tasks.invoice", args=(1,), countdown=600, unique_key="invoice-42")
    again = client.schedule("tasks.invoice", args=(2,), countdown=60, unique_key="invoice-42")
    assert first.created and not first.replaced
    assert (again.job_id, again.created, again.replaced) == (first.job_id, False, False)
    assert again.due_at == first.due_at  # the stored time, not the one asked for
    job = client.get(first.job_id)
    assert job is not None and job.args == [1] and job.unique_key == "invoice-42"
    assert job.to_dict()["unique_key"] == "invoice-42"
    assert client.counts()["scheduled"] == 1


def test_replace_moves_the_holders_due_time_and_payload(storage: Storage) -> None:
    client = Client(storage)
    first = client.schedule("tasks.invoice", args=(1,), countdown=600, unique_key="k")
    moved = client.schedule(
        "tasks.invoice", args=(2,), countdown=60, unique_key="k", on_conflict="replace"
    )
    assert (moved.job_id, moved.created, moved.replaced) == (first.job_id, False, True)
    assert moved.due_at < first.due_at
    job = client.get(first.job_id)
    assert job is not None and job.args == [2] and job.due_at == moved.due_at
    assert client.counts()["scheduled"] == 1


def test_the_key_is_per_task_and_freed_by_a_cancel(storage: Storage) -> None:
    client = Client(storage)
    first = client.schedule("tasks.a", countdown=60, unique_key="k")
    other_task = client.schedule("tasks.b", countdown=60, unique_key="k")
    assert other_task.created and other_task.job_id != first.job_id
    assert client.cancel(first.job_id)
    fresh = client.schedule("tasks.a", countdown=60, unique_key="k")
    assert fresh.created and fresh.job_id != first.job_id
    cancelled = client.get(first.job_id)
    assert cancelled is not None and cancelled.state is JobState.CANCELLED


def test_a_given_id_and_jitter_are_kept(storage: Storage) -> None:
    client = Client(storage)
    plain = client.schedule("tasks.a", countdown=60, job_id="u-1")
    jittered = client.schedule(
        "tasks.a", countdown=60, job_id="u-2", jitter=timedelta(seconds=30), unique_key="k"
    )
    assert jittered.created and jittered.job_id == "u-2"
    assert plain.due_at <= jittered.due_at < plain.due_at + timedelta(seconds=31)
    # the same id again: an idempotent accept, whatever the key
    again = client.schedule("tasks.a", countdown=5, job_id="u-2", unique_key="k")
    assert (again.job_id, again.created, again.due_at) == ("u-2", False, jittered.due_at)


def test_plain_and_unique_specs_mix_in_one_call(storage: Storage) -> None:
    client = Client(storage)
    results = client.schedule_many(
        [
            JobSpec("tasks.a", args=[1], countdown=60, unique_key="k"),
            JobSpec("tasks.a", args=[2], countdown=60),
            JobSpec("tasks.a", args=[3], countdown=60, unique_key="k", on_conflict="replace"),
        ]
    )
    assert [(r.created, r.replaced) for r in results] == [
        (True, False),
        (True, False),
        (False, True),
    ]
    assert results[2].job_id == results[0].job_id != results[1].job_id
    record = storage.get_job(results[0].job_id)
    assert record is not None and decode_payload(record.payload)[0] == [3]
    count = len(shards_of(storage))  # a generated id lives in its key's shard
    assert shard_of(results[0].job_id, count) == unique_shard("tasks.a", "k", count)
