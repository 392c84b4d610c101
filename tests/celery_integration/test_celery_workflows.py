"""Retries, canvas and revoke through the plugin, with real ``celery worker`` processes: a retry
beyond the threshold waits in storage (not in worker memory) and runs again as the same task; a
chain, link/link_error and group members are stored and run as Celery would run them; a revoke
cancels the stored job."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from celery import chain, group

from devtools.waiting import wait_until
from parallel_scheduler import JobState
from storage_adapters import list_jobs
from tests.celery_integration.celery_cluster import Cluster

pytestmark = [pytest.mark.celery, pytest.mark.redis]


def state(cluster: Cluster, job_id: str) -> JobState | None:
    job = cluster.storage.get_job(job_id)
    return None if job is None else job.state


def runs_of(cluster: Cluster, task_id: str) -> list[dict[str, Any]]:
    return [e for e in cluster.executions() if e["id"] == task_id]


def test_a_retry_waits_in_storage_and_runs_as_the_same_task(cluster: Cluster) -> None:
    # Given a worker running the scheduler, and a task that retries twice beyond the threshold
    worker = cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    delays = [3.0, 1.5]
    result = app.send_task(
        "plugin.flaky", ("x",), {"delays": delays}, headers={"x_tenant": "acme"}, expires=600
    )
    expires = cluster.storage.now() + 600
    task_id = result.id
    # When it first fails, its retry is stored under its own job id, not kept by the worker
    first = f"{task_id}:retry-1"
    wait_until(lambda: state(cluster, first) is not None, timeout=20)
    name = f"w0-{cluster.queue}@{socket.gethostname()}"
    replies = app.control.inspect(destination=[name], timeout=3).scheduled() or {}
    assert replies.get(name) == []  # the worker answered: it holds no eta task
    stored = cluster.storage.get_job(first)
    assert stored is not None
    assert worker.poll() is None
    # with the task's own expiry (Celery passes the expires header, an ISO 8601 string)
    assert json.loads(stored.payload)["options"]["expires"] == pytest.approx(expires, abs=5)
    # Then it runs again when due, twice, as the same task with its retry count
    wait_until(lambda: len(runs_of(cluster, task_id)) == 3, timeout=30)
    runs = runs_of(cluster, task_id)
    assert [r["retries"] for r in runs] == [0, 1, 2]
    assert {r["root_id"] for r in runs} == {task_id}
    assert [r["tenant"] for r in runs] == ["acme"] * 3  # the caller's headers survive
    assert runs[1]["at"] >= stored.due_at - 0.05
    assert runs[1]["at"] - runs[0]["at"] >= delays[0] - 0.1
    for number in (1, 2):
        job_id = f"{task_id}:retry-{number}"
        wait_until(lambda j=job_id: state(cluster, j) is JobState.ENQUEUED, timeout=10)
    # And nothing else ran: each retry ran exactly once
    assert len(cluster.executions()) == 3


def test_a_chain_with_a_countdown_is_stored_and_runs_in_order(cluster: Cluster) -> None:
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    steps = [app.signature("plugin.record", ("step", n), immutable=True) for n in (1, 2, 3)]
    result = chain(*steps).apply_async(countdown=1.5)
    # The first step is stored (the only job), carrying the rest of the chain as signatures
    [first] = list_jobs(cluster.storage, None, 10)
    assert first.state is JobState.SCHEDULED
    options = json.loads(first.payload)["options"]
    assert [s["args"] for s in reversed(options["chain"])] == [["step", 2], ["step", 3]]
    wait_until(lambda: len(cluster.executions()) == 3, timeout=30)
    runs = cluster.executions()
    assert [r["args"] for r in runs] == [["step", 1], ["step", 2], ["step", 3]]
    assert runs[0]["at"] >= first.due_at - 0.05
    assert runs[-1]["id"] == result.id
    wait_until(lambda: state(cluster, first.id) is JobState.ENQUEUED, timeout=10)


def test_link_and_link_error_are_stored_and_called(cluster: Cluster) -> None:
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    ok = app.signature("plugin.record", ("main",), immutable=True)
    ok.set(link=app.signature("plugin.record", ("linked",), immutable=True))
    bad = app.signature("plugin.fail", ("boom",), immutable=True)
    bad.set(link_error=app.signature("plugin.record", ("errback",), immutable=True))
    main = ok.apply_async(countdown=1.5)
    failing = bad.apply_async(countdown=1.5)
    for result in (main, failing):
        assert state(cluster, result.id) is JobState.SCHEDULED
    wait_until(lambda: len(cluster.executions()) == 3, timeout=30)
    args = [r["args"][0] for r in cluster.executions()]
    assert sorted(args) == ["errback", "linked", "main"]
    assert args.index("main") < args.index("linked")


def test_group_members_are_stored_and_know_their_group(cluster: Cluster) -> None:
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    members = [app.signature("plugin.record", ("member", n), immutable=True) for n in range(3)]
    result = group(members).apply_async(countdown=1.5)
    for child in result.children:
        assert state(cluster, child.id) is JobState.SCHEDULED
    wait_until(lambda: len(cluster.executions()) == 3, timeout=30)
    runs = {r["id"]: r for r in cluster.executions()}
    assert set(runs) == {child.id for child in result.children}
    for index, child in enumerate(result.children):
        assert runs[child.id]["group"] == result.id
        assert runs[child.id]["group_index"] == index


def test_revoke_cancels_a_stored_call_even_for_a_worker_started_later(
    redis_cluster: Cluster,
) -> None:
    cluster = redis_cluster
    app = cluster.producer()
    record = app.tasks["plugin.record"]
    revoked = record.apply_async(("revoked",), countdown=1.5)
    kept = record.apply_async(("kept",), countdown=2.0)
    # When the call is revoked before any worker runs (no worker will remember the revoke)
    revoked.revoke()
    assert state(cluster, revoked.id) is JobState.CANCELLED
    app.control.revoke([kept.id + "-other"])  # a list of ids, as Celery takes, none stored
    assert state(cluster, kept.id) is JobState.SCHEDULED
    # Then a worker started afterwards runs the kept call, and never the revoked one
    cluster.start_worker("--parallel-scheduler")
    wait_until(lambda: [r["id"] for r in cluster.executions()] == [kept.id], timeout=30)
    assert state(cluster, revoked.id) is JobState.CANCELLED


def test_revoke_cancels_a_stored_retry(redis_cluster: Cluster) -> None:
    cluster = redis_cluster
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    result = app.send_task("plugin.flaky", ("x",), {"delays": [60.0]})
    retry = f"{result.id}:retry-1"
    wait_until(lambda: state(cluster, retry) is JobState.SCHEDULED, timeout=20)
    app.control.revoke(result.id)
    assert state(cluster, retry) is JobState.CANCELLED
