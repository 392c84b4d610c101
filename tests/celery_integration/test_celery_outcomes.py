"""Execution outcomes recorded by real ``celery worker`` processes on the Redis and RabbitMQ
brokers: every job released from storage gets its timeline (received, started, then succeeded,
failed, retried or revoked, with who and how long), and a plain Celery call gets none."""

from __future__ import annotations

import re
import socket
import urllib.request
from collections import Counter

import pytest
from flask.testing import FlaskClient

from devtools.waiting import wait_until
from parallel_scheduler import Client, JobState
from parallel_scheduler.dashboard import create_app
from storage_adapters import OutcomeEvent, OutcomeQuery, OutcomeState
from tests.celery_integration.celery_cluster import Cluster

pytestmark = [pytest.mark.celery, pytest.mark.redis]

S = OutcomeState


def states(cluster: Cluster, job_id: str) -> list[OutcomeState]:
    return [event.state for event in cluster.storage.outcome_history(job_id)]


def ends_with(cluster: Cluster, job_id: str, *tail: OutcomeState) -> bool:
    return states(cluster, job_id)[-len(tail) :] == list(tail)


def two_runs(cluster: Cluster, job_id: str) -> bool:
    """A run that retried, then one that succeeded."""
    seen = states(cluster, job_id)
    expected = {S.RECEIVED: 2, S.STARTED: 2, S.RETRIED: 1, S.SUCCEEDED: 1}
    return Counter(seen) == expected and seen[-1] is S.SUCCEEDED


def test_each_released_job_gets_its_timeline(cluster: Cluster) -> None:
    # Given a worker running the scheduler, and calls stored through apply_async
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    ok = app.send_task("plugin.record", ("ok",), {"n": 1}, countdown=1.5)
    bad = app.send_task("plugin.fail", ("bad",), countdown=1.5)
    quick = app.send_task("plugin.flaky", ("quick",), {"delays": [0.2]}, countdown=1.5)
    stored = app.send_task("plugin.flaky", ("stored",), {"delays": [1.5]}, countdown=1.5)
    plain = app.send_task("plugin.record", ("plain",), {"n": 2})
    ran = S.RECEIVED, S.STARTED
    # When they fall due and run, Then each one's timeline is recorded, in order
    wait_until(lambda: ends_with(cluster, ok.id, *ran, S.SUCCEEDED), timeout=60)
    wait_until(lambda: ends_with(cluster, bad.id, *ran, S.FAILED), timeout=60)
    # (a retry on Celery's own path runs again under the same id, its message received as soon
    # as it is sent, so maybe before the retry is told; a stored one runs as the job stored,
    # once it is released)
    wait_until(lambda: two_runs(cluster, quick.id), timeout=60)
    retry_job = f"{stored.id}:retry-1"
    wait_until(lambda: states(cluster, retry_job) == [*ran, S.SUCCEEDED], timeout=60)
    assert states(cluster, stored.id) == [*ran, S.RETRIED]
    history = cluster.storage.outcome_history(ok.id)
    assert all(e.worker and e.worker.startswith(f"w0-{cluster.queue}@") for e in history)
    assert all(e.task == "plugin.record" for e in history)
    done = history[-1]
    assert done.runtime is not None and 0 <= done.runtime < 10
    ok_job = cluster.storage.get_job(ok.id)
    assert ok_job is not None and history[0].at >= ok_job.due_at - 0.5
    failed = cluster.storage.outcome_history(bad.id)[-1]
    assert failed.error is not None and failed.error.startswith("RuntimeError: fails on purpose")
    retried = [e for e in cluster.storage.outcome_history(stored.id) if e.state is S.RETRIED]
    assert retried[0].retry_id == f"{stored.id}:retry-1"
    quick_retry = [e for e in cluster.storage.outcome_history(quick.id) if e.state is S.RETRIED]
    assert quick_retry[0].retry_id is None
    # And the plain call, never stored, has no outcome
    wait_until(lambda: plain.id in {e["id"] for e in cluster.executions()}, timeout=30)
    assert cluster.storage.outcome_history(plain.id) == []
    # And the newest failures page lists the failure, the counts count every final outcome
    failures = cluster.storage.outcomes_page(OutcomeQuery(state=S.FAILED), 10)
    assert [e.job_id for e in failures] == [bad.id]
    counts = cluster.storage.outcome_counts()
    assert counts["plugin.record"][S.SUCCEEDED] == 1
    assert counts["plugin.flaky"][S.RETRIED] == 2 and counts["plugin.flaky"][S.SUCCEEDED] == 2
    # And the dashboard shows each: the Outcomes page the failure first, each job its timeline
    web = dashboard(cluster)
    page = web.get("/outcomes").get_data(as_text=True)
    failures = page.split('id="outcome-failures"', 1)[1].split("</table>", 1)[0]
    assert bad.id in failures and "RuntimeError: fails on purpose" in failures
    listing = page.split('id="outcome-list"', 1)[1].split("</table>", 1)[0]
    assert all(job_id in listing for job_id in (ok.id, bad.id, quick.id, stored.id, retry_job))
    for job_id, last in ((ok.id, "succeeded"), (bad.id, "failed"), (stored.id, "retried")):
        detail = web.get(f"/jobs/detail?id={job_id}").get_data(as_text=True)
        timeline = detail.split('id="job-timeline"', 1)[1].split("</table>", 1)[0]
        rows = re.findall(r'<tr class="timeline-([\w-]+)">', timeline)
        assert rows[:2] == ["created", "sent"] and rows[-1] == last, rows


def test_a_released_job_revoked_before_it_runs_is_recorded_revoked(cluster: Cluster) -> None:
    # Given a worker running the scheduler, and a job routed to a queue it does not consume yet
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    later = f"{cluster.queue}-later"
    job = app.send_task("plugin.record", ("late",), {"n": 3}, countdown=1.2, queue=later)
    wait_until(
        lambda: (found := cluster.storage.get_job(job.id)) and found.state is JobState.ENQUEUED,
        timeout=60,
    )
    # When it is revoked once released, and the worker then consumes its queue
    worker = f"w0-{cluster.queue}@{socket.gethostname()}"
    app.control.revoke(job.id, destination=[worker])
    app.control.add_consumer(later, destination=[worker], reply=True)
    # Then its timeline ends revoked, and it never ran
    wait_until(lambda: ends_with(cluster, job.id, S.REVOKED), timeout=60)
    assert job.id not in {e["id"] for e in cluster.executions()}
    event: OutcomeEvent = cluster.storage.latest_outcomes([job.id])[job.id]
    assert event.state is S.REVOKED
    page = dashboard(cluster).get("/outcomes?state=revoked").get_data(as_text=True)
    assert job.id in page.split('id="outcome-list"', 1)[1]


def dashboard(cluster: Cluster) -> FlaskClient:
    """The dashboard over the cluster's storage, as its test client."""
    app = create_app(Client(cluster.storage, retry_for=1.0))
    app.testing = True
    return app.test_client()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> str:
    return str(
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    )


def lateness_count(text: str, queue: str) -> float:
    found = re.search(
        rf'parallel_scheduler_start_lateness_seconds_count\{{queue="{queue}"\}} (\S+)', text
    )
    return 0.0 if found is None else float(found.group(1))


@pytest.mark.parametrize(
    "pool",
    [
        pytest.param(("--pool", "solo"), id="solo"),
        # Celery's default: the tasks run in two child processes, not in the one serving /metrics
        pytest.param(("--pool", "prefork"), id="prefork"),
        # each child runs one task and is replaced: the ended children's counts must stay
        pytest.param(("--pool", "prefork", "--max-tasks-per-child", "1"), id="prefork-recycled"),
    ],
)
def test_the_worker_exposes_start_lateness_and_outcomes_as_metrics(
    redis_cluster: Cluster, pool: tuple[str, ...]
) -> None:
    # Given a worker running the scheduler with its metrics served, on the given pool
    cluster = redis_cluster
    port = free_port()
    cluster.env["PARALLEL_SCHEDULER_METRICS_PORT"] = str(port)
    cluster.start_worker("--parallel-scheduler", *pool)
    cluster.wait_ready(1)
    app = cluster.producer()
    oks = [app.send_task("plugin.record", ("ok",), {"n": n}, countdown=1.2) for n in range(3)]
    bad = app.send_task("plugin.fail", ("bad",), countdown=1.2)
    ended = ([S.SUCCEEDED], [S.FAILED])
    for job in (*oks, bad):
        wait_until(lambda job=job: states(cluster, job.id)[-1:] in ended, timeout=60)
    # When its metrics are scraped, Then every run shows: the lateness per queue (one
    # observation per started job) and the outcomes per task, whichever process ran them
    # (a child hands its counts over at most once a second: wait for all of them)
    lines = [
        f'parallel_scheduler_task_outcomes_total{{outcome="{outcome}",task="{task}"}} {count}.0'
        for task, outcome, count in (
            ("plugin.record", "succeeded", 3),
            ("plugin.fail", "failed", 1),
        )
    ]

    def all_counted() -> bool:
        text = scrape(port)
        return lateness_count(text, cluster.queue) == 4.0 and all(line in text for line in lines)

    wait_until(all_counted, timeout=30)
    # and the counts stay put: a later scrape (the children's files folded in) says the same
    assert lateness_count(scrape(port), cluster.queue) == 4.0
