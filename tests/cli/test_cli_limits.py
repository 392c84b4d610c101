"""``queue limit|unlimit`` and ``task limit|unlimit`` as a user runs them, on every adapter: what
each did said in words, the limits beside the pauses in ``queue list`` and ``task list`` (and
``--json``, in the HTTP API's shapes), and the storage-side metrics the exporter serves (each
limit's releases per second)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.process.storage_metrics import storage_registry
from tests.storage.entry_points import Store, opened


def run(target: Store, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--storage-url", target.url, "--prefix", target.prefix, *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out


def test_limit_list_and_unlimit_a_queue_and_a_task(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = Client(target.storage)
        # limiting says the rate and the burst
        code, out = run(target, capsys, "queue", "limit", "emails", "--rate", "100/s")
        assert (code, out) == (0, "limited queue 'emails' to 100/s (burst 1)\n")
        code, out = run(
            target, capsys, "task", "limit", "mail.send", "--rate", "30/min", "--burst", "10"
        )
        assert (code, out) == (0, "limited task 'mail.send' to 30/m (burst 10)\n")
        code, out = run(target, capsys, "task", "limit", "r.b", "--rate", "2/h", "--by", "ops")
        assert code == 0
        # each list shows its kind's limits beside its pauses
        client.pause_queue("emails", note="smtp down", by="ops")
        code, out = run(target, capsys, "queue", "list")
        lines = out.splitlines()
        assert code == 0 and lines[0] == "queue\tnote\tpaused by\tsince"
        assert lines[1].startswith("emails\tsmtp down\tops\t")
        assert lines[3] == "rate-limited queue\trate\tburst\tset by\tsince\tnext free"
        assert lines[4].startswith("emails\t100/s\t1\t") and lines[4].endswith("\tnow")
        assert "mail.send" not in out
        code, out = run(target, capsys, "task", "list")
        assert "mail.send\t30/m\t10\t" in out and "r.b\t2/h\t1\tops\t" in out
        assert "emails" not in out
        # --json: the answers of GET /api/v1/pauses and GET /api/v1/limits, for one kind
        code, out = run(target, capsys, "queue", "list", "--json")
        shown = json.loads(out)
        assert [pause["name"] for pause in shown["pauses"]] == ["emails"]
        (limit,) = shown["limits"]
        assert {k: v for k, v in limit.items() if k not in ("set_by", "set_at")} == {
            "kind": "queue",
            "name": "emails",
            "rate": "100/s",
            "count": 100,
            "period": 1.0,
            "per_second": 100.0,
            "burst": 1,
            "free_at": None,
        }
        assert "@" in limit["set_by"] and limit["set_at"].endswith("+00:00")
        # setting again replaces it
        code, out = run(target, capsys, "queue", "limit", "emails", "--rate", "5/m", "--burst=3")
        assert (code, out) == (0, "limited queue 'emails' to 5/m (burst 3)\n")
        (emails, *_) = client.rate_limits()
        assert (emails.name, emails.count, emails.period, emails.burst) == ("emails", 5, 60.0, 3)
        # unlimiting says whether one was in force
        code, out = run(target, capsys, "queue", "unlimit", "emails")
        assert (code, out) == (0, "removed the rate limit of queue 'emails'\n")
        code, out = run(target, capsys, "queue", "unlimit", "emails")
        assert (code, out) == (0, "queue 'emails' had no rate limit: nothing changed\n")
        code, out = run(target, capsys, "queue", "list", "--json")
        assert json.loads(out)["limits"] == []
        assert [lim.name for lim in client.rate_limits()] == ["mail.send", "r.b"]
        assert [pause.name for pause in client.pauses()] == ["emails"]  # the pause stays


def test_the_exporters_metrics_show_each_limit(adapter_kind: str, tmp_path: Path) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = Client(target.storage)
        client.limit_queue("emails", "120/m", burst=5)
        client.limit_task("mail.send", "3/s")
        text = generate_latest(storage_registry(client)).decode()
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        name = "parallel_scheduler_rate_limit_per_second"
        assert samples[(name, (("kind", "queue"), ("name", "emails")))] == 2.0
        assert samples[(name, (("kind", "task"), ("name", "mail.send")))] == 3.0
        client.unlimit_queue("emails")
        client.unlimit_task("mail.send")
        text = generate_latest(storage_registry(client)).decode()
        assert name + "{" not in text
