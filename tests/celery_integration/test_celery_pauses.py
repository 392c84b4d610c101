"""A paused queue end to end, with a real ``celery worker`` running the scheduler, on each
broker and release path: a call routed to the paused queue by the app (through the plugin, its
``task_default_queue``) is stored with that queue and held when due, never reaching the worker,
while a call to another queue due at the same instant is released; on resume the held call runs.
The firings of a ``beat_schedule`` entry that names no queue are routed by the worker's app to
the paused queue, and held the same way."""

from __future__ import annotations

import pytest

from devtools.waiting import wait_until
from parallel_scheduler import Client, JobState
from storage_adapters import list_jobs
from tests.celery_integration.celery_cluster import Cluster

pytestmark = [pytest.mark.celery, pytest.mark.redis]


def test_a_paused_queues_call_is_held_until_resumed(cluster: Cluster) -> None:
    other = f"{cluster.queue}-other"  # a queue no worker consumes: its message stays listed
    # Given a worker running the scheduler, and the worker's queue paused
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    client = Client(cluster.storage)
    assert client.pause_queue(cluster.queue, note="end to end", by="e2e") == 0
    record = cluster.producer().tasks["plugin.record"]
    try:
        # When a call routed to it (the app's default queue) and one to another queue fall due
        held = record.apply_async((1,), {"n": 1}, countdown=1.5)
        control = record.apply_async((2,), {"n": 2}, countdown=1.5, queue=other)
        stored = cluster.storage.get_job(held.id)
        assert stored is not None and stored.queue == cluster.queue
        assert stored.state is JobState.HELD
        # Then the scheduler releases the other queue's call, and not the paused one's
        wait_until(
            lambda: (
                (job := cluster.storage.get_job(control.id)) is not None
                and job.state is JobState.ENQUEUED
            ),
            timeout=60,
        )
        job = cluster.storage.get_job(held.id)
        assert job is not None and job.state is JobState.HELD
        assert job.due_at <= cluster.storage.now()  # due, and still held
        assert held.id not in {run["id"] for run in cluster.executions()}
        # When the queue is resumed, the held call reaches the worker and runs once
        assert client.resume_queue(cluster.queue) == 1
        wait_until(lambda: held.id in {run["id"] for run in cluster.executions()}, timeout=60)
        runs = [run for run in cluster.executions() if run["id"] == held.id]
        assert len(runs) == 1 and runs[0]["routing_key"] == cluster.queue
    finally:
        cluster.records.delete(other, f"_kombu.binding.{other}")


def test_a_paused_queue_holds_the_firings_its_app_routes_to_it(redis_cluster: Cluster) -> None:
    cluster = redis_cluster
    cluster.env["PS_BEAT_EVERY"] = "1"  # a beat entry naming no queue, fired every second
    client = Client(cluster.storage)
    client.pause_queue(cluster.queue, by="e2e")
    # Given the worker's scheduler firing the entry while its queue is paused
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)

    def held() -> list[str]:
        rows = list_jobs(cluster.storage, JobState.HELD, 100)
        assert all(row.queue == cluster.queue for row in rows), rows
        return [row.id for row in rows]

    # Then its firings are held with the queue the app routes them to, and none runs
    wait_until(lambda: len(held()) >= 3, timeout=60)
    assert not [run for run in cluster.executions() if run["args"] == ["beat"]]
    # When the queue is resumed, the held firings run
    firings = set(held())
    assert client.resume_queue(cluster.queue) >= len(firings)
    wait_until(lambda: firings <= {run["id"] for run in cluster.executions()}, timeout=60)
