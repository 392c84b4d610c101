"""The Celery plugin as users see it: install(app), apply_async(countdown=…) stored durably and
executed once by real ``celery worker`` processes on the Redis and RabbitMQ brokers."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.utils.time import maybe_make_aware

from devtools.waiting import wait_until
from parallel_scheduler import InvalidJobError, JobState
from parallel_scheduler.celery import job_scheduled
from parallel_scheduler.ranges import MAX_NESTING
from tests.celery_integration.celery_cluster import ROOT, Cluster

pytestmark = [pytest.mark.celery, pytest.mark.redis]


def test_far_calls_run_once_when_due_with_their_routing(cluster: Cluster) -> None:
    # Given a worker running the scheduler, and calls made through plain apply_async
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    app = cluster.producer()
    record = app.tasks["plugin.record"]
    far = [
        record.apply_async((i,), {"n": i}, countdown=1.5 + i * 0.02, headers={"x_tenant": "acme"})
        for i in range(40)
    ]
    near = [record.apply_async((100 + i,), {"n": 100 + i}) for i in range(5)]
    expired = record.apply_async((999,), {"n": 999}, countdown=2.5, expires=1)
    # Then the far ones (and only those) were stored, with their ids as the results' ids
    stored = {r.id: cluster.storage.get_job(r.id) for r in [*far, expired]}
    assert all(job is not None for job in stored.values())
    assert cluster.storage.get_job(near[0].id) is None
    if cluster.fast_publish:  # with their broker messages built already, but for the expiring one
        assert not cluster.has_envelope(expired.id)
        # (read before the state: a job released meanwhile has dropped its message)
        assert all(cluster.has_envelope(r.id) or not cluster.still_scheduled(r.id) for r in far)
    # When they fall due, every one runs exactly once, not before it was due
    expected = {r.id for r in far + near}
    wait_until(lambda: {e["id"] for e in cluster.executions()} >= expected, timeout=60)
    wait_until(
        lambda: (job := cluster.storage.get_job(expired.id)) and job.state is JobState.EXPIRED,
        timeout=30,
    )
    runs = cluster.executions()
    assert Counter(e["id"] for e in runs) == Counter(expected)
    for run in runs:
        job = stored.get(run["id"])
        if job is not None:
            assert run["at"] >= job.due_at - 0.05
            assert run["tenant"] == "acme"
        assert run["args"] == [run["kwargs"]["n"]]
        assert run["routing_key"] == cluster.queue


def test_the_scheduler_fails_over_when_its_worker_is_killed(redis_cluster: Cluster) -> None:
    cluster = redis_cluster
    # Given two workers running only the scheduler (on an idle queue) and one executing tasks
    idle = f"{cluster.queue}-idle"
    first = cluster.start_worker("--parallel-scheduler", queue=idle)
    second = cluster.start_worker("--parallel-scheduler", queue=idle)
    cluster.start_worker()
    cluster.wait_ready(3)
    app = cluster.producer()
    results = [
        app.send_task("plugin.record", (i,), {"n": i}, countdown=1.2 + i * 0.02) for i in range(200)
    ]
    ids = {r.id for r in results}
    wait_until(lambda: len(cluster.executions()) >= 20, timeout=30)
    # When the worker holding the scheduler lock is killed outright
    holder = wait_until(lambda: cluster.storage.lock_holder("delayed-scheduler"), timeout=10)
    pid = int(holder.owner.rsplit(":", 1)[1])
    victim = next(p for p in (first, second) if p.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    # Then the other worker takes the lock over within its lease and every job still runs
    survivor = wait_until(
        lambda: (h := cluster.storage.lock_holder("delayed-scheduler")) and h.owner != holder.owner,
        timeout=15,
    )
    assert survivor
    wait_until(lambda: {e["id"] for e in cluster.executions()} >= ids, timeout=60)
    runs = Counter(e["id"] for e in cluster.executions())
    assert set(runs) == ids
    # A kill can repeat at most the jobs that were in flight at that moment
    assert sum(runs.values()) - len(ids) <= 1000


def test_below_the_threshold_or_in_a_chord_celery_keeps_the_call(
    redis_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    app = redis_cluster.producer()
    result = app.send_task("plugin.record", (1,), countdown=0.5)
    with caplog.at_level(logging.WARNING, logger="parallel_scheduler.celery"):
        member = app.send_task(
            "plugin.record", (2,), countdown=3600, chord=app.signature("plugin.record")
        )
    assert redis_cluster.storage.get_job(result.id) is None
    assert redis_cluster.storage.get_job(member.id) is None  # a chord member goes Celery's way,
    assert "Celery's own eta path" in caplog.text  # at WARNING, with the reason
    assert "chord: a chord member reports to its chord" in caplog.text
    messages = [json.loads(m) for m in redis_cluster.records.lrange(redis_cluster.queue, 0, -1)]
    assert {m["headers"]["id"] for m in messages} == {result.id, member.id}
    assert all(m["headers"]["eta"] for m in messages)


def test_schedule_helper_cancel_and_idempotent_ids(redis_cluster: Cluster) -> None:
    app = redis_cluster.producer()
    record = app.tasks["plugin.record"]
    seen: list[dict[str, Any]] = []

    def on_scheduled(sender: str, **info: Any) -> None:
        seen.append({"task": sender, **info})

    job_scheduled.connect(on_scheduled, weak=False)
    try:
        soon = record.schedule((1,), countdown=0.2)  # stored although below the threshold
        first = record.apply_async((2,), countdown=600, task_id="invoice-7")
        again = record.apply_async((3,), countdown=900, task_id="invoice-7")
    finally:
        job_scheduled.disconnect(on_scheduled)
    assert first.id == again.id == "invoice-7"
    assert [s["created"] for s in seen] == [True, True, False]
    assert seen[0]["task"] == "plugin.record"
    job = redis_cluster.storage.get_job("invoice-7")
    assert job is not None and json.loads(job.payload)["args"] == [2]
    assert redis_cluster.storage.get_job(soon.id) is not None
    assert app.parallel_scheduler.cancel("invoice-7")
    cancelled = redis_cluster.storage.get_job("invoice-7")
    assert cancelled is not None and cancelled.state is JobState.CANCELLED


def test_a_naive_eta_follows_celerys_own_rule(redis_cluster: Cluster) -> None:
    # Celery's worker reads a naive eta with maybe_make_aware(eta, conf.timezone), which takes a
    # naive datetime as UTC whatever the time zone setting; a stored call must fall due then too.
    app = redis_cluster.producer()
    app.conf.enable_utc = False
    app.conf.timezone = "Asia/Tokyo"
    naive = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(hours=2)
    result = app.send_task("plugin.record", eta=naive)
    job = redis_cluster.storage.get_job(result.id)
    assert job is not None
    celery_reads_it_as = maybe_make_aware(naive, ZoneInfo("Asia/Tokyo")).timestamp()
    assert job.due_at == pytest.approx(celery_reads_it_as, abs=1e-3)
    assert job.due_at == pytest.approx(redis_cluster.storage.now() + 7200, abs=5)


def test_bad_calls_are_refused_or_flagged(
    redis_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    app = redis_cluster.producer()
    with pytest.raises(InvalidJobError, match="not JSON"):
        app.send_task("plugin.record", (object(),), countdown=600)
    assert sum(redis_cluster.storage.count_by_state().values()) == 0
    with caplog.at_level(logging.WARNING, logger="parallel_scheduler.celery"):
        app.send_task("no.such.task", countdown=600)
    assert "not registered" in caplog.text


@pytest.mark.parametrize(
    "url",
    ["postgresql://u:hunter2@127.0.0.1:1/x", "redis://:hunter2@127.0.0.1:1/0"],
    ids=["postgresql", "redis"],
)
def test_a_worker_with_unreachable_storage_stops_with_one_line(
    redis_cluster: Cluster, url: str
) -> None:
    redis_cluster.env["PARALLEL_SCHEDULER_STORAGE_URL"] = url
    worker = redis_cluster.start_worker("--parallel-scheduler")
    assert worker.wait(timeout=60) == 1
    log = next(redis_cluster.tmp_path.glob("w0-*.log")).read_text()
    ours = [line for line in log.splitlines() if "parallel-scheduler" in line]
    assert len(ours) == 1, log
    assert ours[0].startswith("parallel-scheduler cannot start: ")
    assert "127.0.0.1:1" in ours[0]
    assert "Traceback" not in log
    assert "hunter2" not in log


def test_the_celery_command_runs_a_pass(redis_cluster: Cluster) -> None:
    app = redis_cluster.producer()
    result = app.send_task("plugin.record", (5,), countdown=1.5)
    stored = redis_cluster.storage.get_job(result.id)
    assert stored is not None
    wait_until(lambda: redis_cluster.storage.now() >= stored.due_at, timeout=10)
    output = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "tests.celery_integration.plugin_celery_app",
         "parallel-scheduler",
         "--once"],
        cwd=ROOT, env=redis_cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert output.returncode == 0, output.stderr
    assert json.loads(output.stdout)["delayed"]["released"] == 1
    job = redis_cluster.storage.get_job(result.id)
    assert job is not None and job.state is JobState.ENQUEUED


@pytest.mark.parametrize(
    ("level", "logs_info"), [(["--loglevel", "INFO"], True), (["-l", "warning"], False)]
)
def test_the_celery_command_takes_celerys_loglevel(
    redis_cluster: Cluster, level: list[str], logs_info: bool
) -> None:
    # celery's usual -l/--loglevel is accepted and sets the level: WARNING hides the start line
    output = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "tests.celery_integration.plugin_celery_app",
         "parallel-scheduler", *level, "--once"],
        cwd=ROOT, env=redis_cluster.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert output.returncode == 0, output.stderr
    assert ("starting:" in output.stderr) is logs_info, output.stderr


def test_routes_are_resolved_at_call_time(redis_cluster: Cluster) -> None:
    # Given an app that routes a task to its own queue
    app = redis_cluster.producer()
    app.conf.task_routes = {"plugin.routed": {"queue": "reports"}}
    # When a far call is stored, the queue is fixed then: any app releasing it sends it there
    stored = app.send_task("plugin.routed", countdown=600)
    default = app.send_task("plugin.record", countdown=600)
    options = {
        r.id: json.loads(redis_cluster.storage.get_job(r.id).payload)["options"]  # type: ignore[union-attr]
        for r in (stored, default)
    }
    assert options[stored.id]["queue"] == "reports"
    assert options[default.id]["queue"] == redis_cluster.queue


def test_schedule_checks_arguments_like_apply_async(redis_cluster: Cluster) -> None:
    app = redis_cluster.producer()

    @app.task(name="plugin.two_args", shared=False)  # type: ignore[untyped-decorator]
    def two_args(a: int, b: int) -> None:
        raise AssertionError("never runs here")

    with pytest.raises(TypeError):
        two_args.schedule((1,), countdown=60)
    assert sum(redis_cluster.storage.count_by_state().values()) == 0


def test_every_form_of_a_far_eta_or_countdown_is_stored(redis_cluster: Cluster) -> None:
    """Celery takes an ISO 8601 string for ``eta`` as well as a datetime (issue 19, section 4):
    each form Celery accepts, and each real number or timedelta as a countdown, is measured and
    stored alike, never left to wait in worker memory."""
    app = redis_cluster.producer()
    now = redis_cluster.storage.now()
    far = datetime.fromtimestamp(now + 7200, timezone.utc).replace(microsecond=0)
    etas = {
        "iso string with an offset": far.isoformat(),
        "iso string with Z": far.isoformat().replace("+00:00", "Z"),
        "naive iso string (UTC, as Celery's worker reads it)": far.replace(tzinfo=None).isoformat(),
        "aware datetime": far,
        "naive datetime": far.replace(tzinfo=None),
    }
    for form, eta in etas.items():
        result = app.send_task("plugin.record", (form,), eta=eta)
        job = redis_cluster.storage.get_job(result.id)
        assert job is not None, form
        assert job.due_at == far.timestamp(), form
    countdowns = [7200, 7200.0, Decimal("7200"), Fraction(14400, 2), timedelta(hours=2)]
    for countdown in countdowns:
        result = app.send_task("plugin.record", (str(countdown),), countdown=countdown)
        job = redis_cluster.storage.get_job(result.id)
        assert job is not None, countdown
        assert job.due_at == pytest.approx(now + 7200, abs=5), countdown
    # a zero countdown is no countdown to Celery: the eta is in charge
    result = app.send_task("plugin.record", ("zero",), countdown=0, eta=far.isoformat())
    job = redis_cluster.storage.get_job(result.id)
    assert job is not None and job.due_at == far.timestamp()
    assert redis_cluster.records.llen(redis_cluster.queue) == 0  # nothing went Celery's way


@pytest.mark.parametrize(
    ("when", "named"),
    [
        ({"eta": "tomorrow"}, "eta 'tomorrow'"),
        ({"eta": "2030-13-45T99:00:00"}, "eta '2030-13-45T99:00:00'"),
        ({"eta": 1893456000}, "eta must be a datetime or an ISO 8601 string"),
        ({"countdown": "abc"}, "countdown must be a number of seconds"),
        ({"countdown": [5]}, "countdown must be a number of seconds"),
    ],
)
def test_an_eta_or_countdown_celery_cannot_use_is_refused_by_name(
    redis_cluster: Cluster, when: dict[str, Any], named: str
) -> None:
    app = redis_cluster.producer()
    with pytest.raises(InvalidJobError) as error:
        app.send_task("plugin.record", (1,), **when)
    assert named in str(error.value)
    assert sum(redis_cluster.storage.count_by_state().values()) == 0
    assert redis_cluster.records.llen(redis_cluster.queue) == 0


def test_a_near_decimal_or_timedelta_countdown_takes_celerys_path(redis_cluster: Cluster) -> None:
    """Below the threshold the call is Celery's, with the countdown as seconds Celery can add."""
    app = redis_cluster.producer()
    for countdown in (Decimal("0.5"), timedelta(seconds=0.5)):
        result = app.send_task("plugin.record", (1,), countdown=countdown)
        assert redis_cluster.storage.get_job(result.id) is None
    messages = [json.loads(m) for m in redis_cluster.records.lrange(redis_cluster.queue, 0, -1)]
    assert len(messages) == 2 and all(m["headers"]["eta"] for m in messages)


def test_arguments_nested_to_the_limit_are_released_and_run(cluster: Cluster) -> None:
    """The nesting limit (ranges.MAX_NESTING) is below what the release, the broker message and
    the worker's JSON can carry: a job nested exactly that deep runs with its arguments whole."""
    cluster.start_worker("--parallel-scheduler")
    cluster.wait_ready(1)
    deep: list[Any] = []  # one level below the args list and the keyword object, the first
    for _ in range(MAX_NESTING - 2):
        deep = [deep]
    nested_kwargs = {"n": 1, "deep": deep}
    result = (
        cluster.producer().tasks["plugin.record"].apply_async((deep,), nested_kwargs, countdown=1.5)
    )
    assert cluster.storage.get_job(result.id) is not None
    wait_until(lambda: any(e["id"] == result.id for e in cluster.executions()), timeout=60)
    (run,) = [e for e in cluster.executions() if e["id"] == result.id]
    assert run["args"] == [deep] and run["kwargs"] == nested_kwargs
