"""The data set the browser tests look at, written through the public ``Client`` (and, for the
states only a scheduler reaches, through the same storage calls a scheduler makes), so the
dashboard reads rows exactly as production writes them.

One small, realistic store: scheduled jobs of three tasks on two queues (enough to page through),
one job whose argument is a ``<script>`` tag, jobs a scheduler enqueued, expired and retried
(``last_error``), a cancelled job, two recurring jobs (cron in a named zone, and an interval)
and one live scheduler instance holding the delayed scheduler's lock.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass, field

from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from storage_adapters import InstanceRecord, JobState

SCRIPT_ARG = "<script>alert(1)</script>"
SCRIPT_JOB = "job-with-script-arg"
TASKS = ("billing.send_invoice", "mail.send_welcome", "reports.build_export")
QUEUES = ("billing", "default")
INSTANCE_ID = "scheduler-a1b2c3"


@dataclass
class DataSet:
    """What ``fill`` wrote: the ids per state and task, to compare the pages against."""

    scheduled: list[str] = field(default_factory=list)  # future, ordered by (due_at, id)
    by_task: dict[str, list[str]] = field(default_factory=dict)  # scheduled ids of each task
    enqueued: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)  # scheduled again, with a last_error
    cancelled: list[str] = field(default_factory=list)
    recurring: list[str] = field(default_factory=list)


def fill(client: Client, scheduled: int = 30) -> DataSet:
    """Write the data set into ``client``'s (empty, set-up) store and return what it holds."""
    data = DataSet()
    now = float(math.floor(client.storage.now()))  # whole seconds, as people schedule
    specs = []
    for n in range(scheduled):
        task = TASKS[n % len(TASKS)]
        job_id = f"{task.split('.')[1].replace('_', '-')}-{n:04d}"
        eta = now + 600 + 97 * n  # distinct due times, so the order is (due_at, id) = insertion
        specs.append(
            JobSpec(
                task,
                args=[1000 + n],
                kwargs={"customer": f"c-{n:03d}", "retry": n % 2 == 0},
                options={"queue": QUEUES[n % len(QUEUES)]},
                id=job_id,
                eta=eta,
            )
        )
        data.scheduled.append(job_id)
        data.by_task.setdefault(task, []).append(job_id)
    specs.append(
        JobSpec(
            "mail.send_welcome",
            args=[SCRIPT_ARG],
            kwargs={"html": SCRIPT_ARG},
            id=SCRIPT_JOB,
            eta=now + 600 + 97 * scheduled,
        )
    )
    data.scheduled.append(SCRIPT_JOB)
    data.by_task["mail.send_welcome"].append(SCRIPT_JOB)
    client.schedule_many(specs)
    _past_jobs(client, now, data)
    _recurring(client, data)
    _live_instance(client)
    return data


def _past_jobs(client: Client, now: float, data: DataSet) -> None:
    """Jobs that fell due and were handled as a scheduler would: claimed under its lock, then
    enqueued, expired or given back with an error."""
    outcomes = ["enqueued"] * 6 + ["expired", "expired", "errored", "cancelled"]
    ids = [f"past-{outcome}-{n:02d}" for n, outcome in enumerate(outcomes)]
    client.schedule_many(
        JobSpec(
            TASKS[n % len(TASKS)],
            args=[n],
            options={"queue": "default", "expires": 3600},
            id=job_id,
            eta=now - 300 + n,
        )
        for n, job_id in enumerate(ids)
    )
    store = client.storage
    lock = store.acquire_lock("delayed-scheduler", INSTANCE_ID, 300)
    assert lock is not None, "the delayed scheduler's lock is held by someone else"
    for job_id, outcome in zip(ids, outcomes, strict=True):
        if outcome == "cancelled":
            assert client.cancel(job_id)
            data.cancelled.append(job_id)
            continue
        claim = store.claim(job_id, lock, 60)
        assert claim is not None, job_id
        if outcome == "enqueued":
            assert store.mark_enqueued([claim]) == [job_id]
            data.enqueued.append(job_id)
        elif outcome == "expired":
            assert store.expire([claim], "expired 2 s before its release") == [job_id]
            data.expired.append(job_id)
        else:
            error = "OperationalError: broker unreachable (connection refused)"
            assert store.unclaim([claim], error) == [job_id]
            data.errored.append(job_id)
    # The lock stays held (300 s): the overview shows which live instance holds it.
    assert client.counts()[JobState.ENQUEUED.value] == len(data.enqueued)


def _recurring(client: Client, data: DataSet) -> None:
    client.recurring.save(
        "nightly-report",
        "reports.build_export",
        "30 2 * * *",
        kwargs={"format": "csv"},
        timezone="Europe/Paris",
        misfire_policy="run_once",
        queue="default",
    )
    client.recurring.save("health-ping", "mail.send_welcome", every=300, args=["ops@example.com"])
    data.recurring.extend(["health-ping", "nightly-report"])


def _live_instance(client: Client) -> None:
    """One scheduler process as its heartbeat records it (the overview's instances table)."""
    details = {"last_pass": {}, "locks": ["delayed-scheduler"], "settings": {}}
    client.storage.register_instance(
        InstanceRecord(
            id=INSTANCE_ID,
            host=socket.gethostname(),
            pid=os.getpid(),
            version="test",
            started_at=time.time() - 3600,
            heartbeat_at=0.0,
            details=json.dumps(details),
        )
    )
