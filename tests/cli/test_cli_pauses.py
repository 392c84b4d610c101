"""``queue pause|resume|list`` and ``task pause|resume|list`` as a user runs them, on every
adapter: the counts said in words, ``--json`` in the HTTP API's shape, held jobs in ``list``,
``show`` and ``status`` (which also names each pause), and the storage-side metrics the exporter
serves (held jobs, and each pause with its note and who made it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from parallel_scheduler import Client, JobSpec
from parallel_scheduler.cli import main
from parallel_scheduler.process.storage_metrics import storage_registry
from tests.storage.entry_points import Store, opened


def run(target: Store, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--storage-url", target.url, "--prefix", target.prefix, *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    sys.stderr.write(err)  # captured again: a failing test's report shows why the command failed
    return code, out


def test_pause_list_and_resume_a_queue_and_a_task(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = Client(target.storage)
        client.schedule_many(
            [JobSpec("mail.send", id=f"m{n}", options={"queue": "emails"}) for n in range(1234)]
            + [JobSpec("report.build", id="r1"), JobSpec("report.build", id="r2", countdown=60)]
        )
        # pausing says how many jobs it held
        code, out = run(target, capsys, "queue", "pause", "emails", "--note", "smtp down")
        assert (code, out) == (0, "paused queue 'emails': 1,234 scheduled jobs held\n")
        code, out = run(target, capsys, "task", "pause", "report.build", "--by", "ops")
        assert (code, out) == (0, "paused task 'report.build': 2 scheduled jobs held\n")
        # each list shows its kind's pauses; --json in the API's shape
        code, out = run(target, capsys, "queue", "list", "--json")
        assert json.loads(out)["limits"] == []
        (shown,) = json.loads(out)["pauses"]
        assert {k: v for k, v in shown.items() if k != "paused_at"} == {
            "kind": "queue",
            "name": "emails",
            "note": "smtp down",
            "paused_by": (client.pauses()[0]).paused_by,
        }
        assert shown["paused_at"].endswith("+00:00")
        code, out = run(target, capsys, "task", "list")
        assert code == 0 and "report.build\t-\tops\t" in out and "emails" not in out
        # the held jobs are listed, shown and counted
        code, out = run(target, capsys, "list", "--state", "held", "--limit", "5", "--json")
        assert {job["state"] for job in json.loads(out)} == {"held"}
        code, out = run(target, capsys, "show", "r1", "--json")
        assert json.loads(out)["state"] == "held" and json.loads(out)["queue"] is None
        code, out = run(target, capsys, "status")
        assert code == 0 and "held\t1236" in out
        assert "paused: queue 'emails' by " in out and ": smtp down" in out
        assert "paused: task 'report.build' by ops since " in out
        code, out = run(target, capsys, "status", "--json")
        report = json.loads(out)
        assert report["counts"]["held"] == 1236
        assert [(p["kind"], p["name"]) for p in report["pauses"]] == [
            ("queue", "emails"),
            ("task", "report.build"),
        ]
        # resuming says how many went back, and a second resume that nothing changed
        code, out = run(target, capsys, "queue", "resume", "emails")
        assert (code, out) == (0, "resumed queue 'emails': 1,234 held jobs scheduled again\n")
        code, out = run(target, capsys, "queue", "resume", "emails")
        assert (code, out) == (0, "queue 'emails' was not paused: nothing changed\n")
        code, out = run(target, capsys, "task", "resume", "report.build")
        assert (code, out) == (0, "resumed task 'report.build': 2 held jobs scheduled again\n")
        code, out = run(target, capsys, "queue", "list", "--json")
        assert json.loads(out) == {"pauses": [], "limits": []}
        assert client.counts()["held"] == 0


def test_the_exporters_metrics_show_held_jobs_and_each_pause(
    adapter_kind: str, tmp_path: Path
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = Client(target.storage)
        client.schedule("mail.send", job_id="m", queue="emails")
        client.pause_queue("emails", note="smtp down", by="ops@h1")
        text = generate_latest(storage_registry(client)).decode()
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        assert samples[("parallel_scheduler_jobs", (("state", "held"),))] == 1
        labels = (
            ("kind", "queue"),
            ("name", "emails"),
            ("note", "smtp down"),
            ("paused_by", "ops@h1"),
        )
        started = samples[("parallel_scheduler_pause_start_time_seconds", labels)]
        assert started == pytest.approx(client.pauses()[0].paused_at)
        client.resume_queue("emails")
        text = generate_latest(storage_registry(client)).decode()
        assert "parallel_scheduler_pause_start_time_seconds{" not in text
