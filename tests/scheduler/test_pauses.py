"""Pausing a queue or a task (issue 25, item 1) through the Client on every adapter: a paused
queue's jobs stay held through scheduler passes and go out in due order on resume; the queue a
job is held by is the one known when it is stored (its ``queue`` option, the Celery app's routes
through the plugin, none for a bare client), for delayed jobs and recurring firings alike."""

from __future__ import annotations

import getpass
import math
import socket
from pathlib import Path
from typing import Any

import pytest
from kombu import Queue

from parallel_scheduler import CallableDispatcher, Client, JobSpec, JobState, Settings
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import PauseKind, Storage
from tests.recording_dispatcher import Recorder
from tests.storage.entry_points import Store, opened, producer


def release_pass(storage: Storage, recorder: Recorder) -> int:
    scheduler = DelayedJobScheduler(
        storage, CallableDispatcher(recorder), Settings(max_degree_of_parallelism=1)
    )
    try:
        return scheduler.run_once().released
    finally:
        scheduler.close()


def state_of(storage: Storage, job_id: str) -> JobState:
    record = storage.get_job(job_id)
    assert record is not None, job_id
    return record.state


def test_a_paused_queue_is_held_through_passes_and_released_in_due_order(
    storage: Storage,
) -> None:
    # Given due jobs of the queue emails (stored out of due order) beside another queue's
    client = Client(storage)
    now = storage.now()
    client.schedule_many(
        [
            JobSpec("mail.send", id="e3", eta=now - 10, options={"queue": "emails"}),
            JobSpec("mail.send", id="e1", eta=now - 30, options={"queue": "emails"}),
            JobSpec("report.build", id="r1", eta=now - 20, options={"queue": "reports"}),
            JobSpec("mail.send", id="e2", eta=now - 20, options={"queue": "emails"}),
        ]
    )
    # When the queue is paused, with a note
    assert client.pause_queue("emails", note="mail provider down") == 3
    # Then it is listed with the note and who paused it (user@host by default)
    (pause,) = client.pauses()
    assert (pause.kind, pause.name, pause.note) == (PauseKind.QUEUE, "emails", "mail provider down")
    assert pause.paused_by == f"{getpass.getuser()}@{socket.gethostname()}"
    assert client.counts()["held"] == 3
    # and a scheduler pass sends only the other queue's job, leaving the held ones as they were
    recorder = Recorder()
    assert release_pass(storage, recorder) == 1
    assert recorder.ids == ["r1"]
    held = client.get("e1")
    assert held is not None and held.state is JobState.HELD and held.queue == "emails"
    assert held.to_dict()["state"] == "held" and held.to_dict()["queue"] == "emails"
    assert release_pass(storage, recorder) == 0
    # When it is resumed, the held jobs go out, earliest due first
    assert client.resume_queue("emails") == 3
    assert client.pauses() == []
    assert release_pass(storage, recorder) == 3
    assert recorder.ids == ["r1", "e1", "e2", "e3"]
    # and resuming again changes nothing
    assert client.resume_queue("emails") == 0


def test_a_paused_task_holds_jobs_accepted_while_paused(storage: Storage) -> None:
    client = Client(storage)
    assert client.pause_task("mail.send", note="", by="ops") == 0
    client.schedule("mail.send", job_id="m1")
    client.schedule("report.build", job_id="b1")
    assert state_of(storage, "m1") is JobState.HELD
    assert state_of(storage, "b1") is JobState.SCHEDULED
    (pause,) = client.pauses()
    assert (pause.kind, pause.name, pause.paused_by) == (PauseKind.TASK, "mail.send", "ops")
    # a held job can be cancelled or moved, and stays held when moved
    assert client.reschedule("m1", countdown=60) is True
    assert state_of(storage, "m1") is JobState.HELD
    assert client.resume("task", "mail.send") == 1
    assert state_of(storage, "m1") is JobState.SCHEDULED


def test_the_generic_pause_takes_the_kind_by_name(storage: Storage) -> None:
    client = Client(storage)
    client.schedule("t.a", job_id="a", queue="q1")
    assert client.pause("queue", "q1", "n", "me") == 1
    assert client.pause(PauseKind.QUEUE, "q1", "again", "you") == 0  # already held
    (pause,) = client.pauses()
    assert (pause.note, pause.paused_by) == ("again", "you")
    assert client.list("held")[0].id == "a"
    assert client.resume(PauseKind.QUEUE, "q1") == 1


def test_a_bare_client_stores_the_queue_option_or_none(storage: Storage) -> None:
    client = Client(storage)
    too_long = "q" * 256  # no pause can name it: stored as unknown, the job still accepted
    client.schedule_many(
        [
            JobSpec("t.a", id="named", options={"queue": "emails"}),
            JobSpec("t.a", id="unnamed"),
            JobSpec("t.a", id="long", options={"queue": too_long}),
        ]
    )
    stored = {job_id: storage.get_job(job_id) for job_id in ("named", "unnamed", "long")}
    assert {job_id: r.queue for job_id, r in stored.items() if r is not None} == {
        "named": "emails",
        "unnamed": None,
        "long": None,
    }
    unnamed = client.get("unnamed")
    assert unnamed is not None and unnamed.to_dict()["queue"] is None


def test_the_plugin_stores_the_queue_its_app_routes_to(adapter_kind: str, tmp_path: Path) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        app = producer("pause-routes", target)
        app.conf.task_routes = {"t.report": {"queue": "reports"}}
        calls: dict[str, Any] = {}
        for name in ("t.report", "t.other", "t.special"):

            @app.task(name=name, shared=False)  # type: ignore[untyped-decorator]
            def task() -> None:
                raise AssertionError("never runs here")

            calls[name] = task
        routed = calls["t.report"].apply_async(countdown=60)
        default = calls["t.other"].apply_async(countdown=60)
        special = calls["t.special"].apply_async(countdown=60, queue=Queue("special"))
        queues = {
            result.id: (record.queue if (record := target.storage.get_job(result.id)) else "?")
            for result in (routed, default, special)
        }
        assert queues == {routed.id: "reports", default.id: "celery", special.id: "special"}
        # and a pause of the routed queue holds the routed call only
        assert Client(target.storage).pause_queue("reports") == 1
        assert state_of(target.storage, routed.id) is JobState.HELD
        assert state_of(target.storage, default.id) is JobState.SCHEDULED


def _due_recurring(storage: Storage, client: Client, rid: str, **options: Any) -> float:
    """A recurring job whose tick of the last full hour is due now."""
    client.recurring.save(rid, "t.tick", "0 * * * *", **options)
    tick = math.floor(storage.now() / 3600) * 3600
    assert storage.set_recurring_enabled(rid, True, tick)
    return tick


def test_a_firing_carries_its_payloads_queue_or_the_routers(storage: Storage) -> None:
    # Given two due recurring jobs, one naming a queue, one not; and a paused queue
    client = Client(storage)
    named = _due_recurring(storage, client, "named", queue="emails")
    unnamed = _due_recurring(storage, client, "unnamed")
    client.pause_queue("emails")
    # When a scheduler pass whose router sends unnamed calls to "routed" fires them
    scheduler = RecurringJobScheduler(
        storage, Settings(), route=lambda task, args, kwargs: f"routed-{task}"
    )
    try:
        assert scheduler.run_once().created == 2
    finally:
        scheduler.close()
    # Then each firing has its queue, and the paused queue's firing is held
    first = storage.get_job(firing_id("named", named))
    second = storage.get_job(firing_id("unnamed", unnamed))
    assert first is not None and (first.queue, first.state) == ("emails", JobState.HELD)
    assert second is not None and (second.queue, second.state) == (
        "routed-t.tick",
        JobState.SCHEDULED,
    )


def test_a_trigger_goes_to_the_client_routers_queue(storage: Storage) -> None:
    client = Client(storage, queue_router=lambda task, args, kwargs: "routed")
    client.recurring.save("r", "t.tick", every=3600)
    client.recurring.save("q", "t.tick", every=3600, queue="own")
    client.pause_queue("routed")
    held = storage.get_job(client.recurring.trigger("r"))
    own = storage.get_job(client.recurring.trigger("q"))
    assert held is not None and (held.queue, held.state) == ("routed", JobState.HELD)
    assert own is not None and (own.queue, own.state) == ("own", JobState.SCHEDULED)


@pytest.mark.parametrize("paused", ["queue", "task"])
def test_a_held_job_is_listed_counted_and_shown(storage: Storage, paused: str) -> None:
    client = Client(storage)
    client.schedule("t.a", job_id="a", queue="q")
    client.pause(paused, "q" if paused == "queue" else "t.a")
    (job,) = client.list(JobState.HELD)
    assert job.id == "a" and job.queue == "q"
    assert client.counts()["held"] == 1
    assert client.cancel("a") is True
    assert client.counts()["held"] == 0
