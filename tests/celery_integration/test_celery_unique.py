"""A unique call end to end, with a real ``celery worker`` running the scheduler: two
``apply_async(countdown=1, unique_key=...)`` calls store one job (the second answers the first's
id), which the worker runs once; ``on_conflict="replace"`` moves that job's payload instead."""

from __future__ import annotations

import time

import pytest

from devtools.waiting import wait_until
from storage_adapters import list_jobs
from tests.celery_integration.celery_cluster import Cluster

pytestmark = [pytest.mark.celery, pytest.mark.redis]


def test_two_unique_calls_store_one_job_that_runs_once(redis_cluster: Cluster) -> None:
    cluster = redis_cluster
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    record = cluster.producer().tasks["plugin.record"]
    # When the same unique call is made twice, then a third replaces its payload
    first = record.apply_async((1,), countdown=1, unique_key="k")
    second = record.apply_async((2,), countdown=1, unique_key="k")
    third = record.apply_async((3,), countdown=1, unique_key="k", on_conflict="replace")
    # Then every answer names the one stored job
    assert first.id == second.id == third.id
    assert [job.id for job in list_jobs(cluster.storage, None, 10)] == [first.id]
    # And the worker runs it once, with the replacing call's arguments
    wait_until(lambda: first.id in {run["id"] for run in cluster.executions()}, timeout=60)
    time.sleep(1.5)  # room for a second run, were there one
    runs = [run for run in cluster.executions() if run["task"] == "plugin.record"]
    assert [(run["id"], run["args"]) for run in runs] == [(first.id, [3])]
    # And once released, the key is free: a new call stores a new job
    fresh = record.apply_async((4,), countdown=60, unique_key="k")
    assert fresh.id != first.id
