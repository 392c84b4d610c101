"""Unique jobs at every door (issue 25, item 3): ``Client.schedule``, ``JobSpec`` through
``schedule_many``, the command line, ``apply_async`` through the Celery plugin, the HTTP API's
``POST /api/v1/jobs`` and the dashboard's "Schedule a job" form refuse the same
bad ``unique_key`` or ``on_conflict`` with the words of storage's own check
(``storage_adapters/checks/unique.py``) and write nothing; the command line and ``show``/``list``
say what a unique call did and which key a job holds. On every adapter."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Client, JobSpec
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.errors import InvalidJobError
from storage_adapters import InvalidArgumentError, InvalidRecordError, NewJob
from storage_adapters.checks.unique import check_unique_job
from tests.storage.entry_points import Store, opened, producer

#: Each bad call: ``(unique_key, on_conflict)``.
BAD: dict[str, tuple[Any, Any]] = {
    "empty key": ("", "keep"),
    "key with a newline": ("invoice\n42", "keep"),
    "key with a trailing space": ("invoice-42 ", "keep"),
    "256-character key": ("k" * 256, "keep"),
    "unknown on_conflict": ("invoice-42", "merge"),
}


def expected(key: Any, on_conflict: Any) -> str:
    """What storage itself says of this input."""
    job = NewJob("j", "tasks.invoice", "{}", 0.0, unique_key=key)
    with pytest.raises((InvalidArgumentError, InvalidRecordError)) as refused:
        check_unique_job(job, on_conflict)
    return str(refused.value)


def _client(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    with pytest.raises(InvalidJobError) as refused:
        Client(target.storage).schedule("tasks.invoice", unique_key=key, on_conflict=on_conflict)
    return str(refused.value)


def _schedule_many(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    specs = [
        JobSpec("tasks.invoice", countdown=60),  # a good one first: nothing of it is written
        JobSpec("tasks.invoice", unique_key=key, on_conflict=on_conflict),
    ]
    with pytest.raises(InvalidJobError) as refused:
        Client(target.storage).schedule_many(specs)
    return str(refused.value)


def _command_line(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    capsys.readouterr()
    command = ["--storage-url", target.url, "--prefix", target.prefix, "schedule"]
    code = main([*command, "tasks.invoice", "--unique-key", key, "--on-conflict", on_conflict])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("parallel-scheduler: error: ")]
    assert len(lines) == 1, err
    return str(lines[0]).removeprefix("parallel-scheduler: error: ")


def _celery(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    app = producer("unique-doors", target)
    with pytest.raises(InvalidJobError) as refused:
        app.send_task("tasks.invoice", countdown=60, unique_key=key, on_conflict=on_conflict)
    return str(refused.value)


def _web(target: Store) -> Any:
    app = create_app(Client(target.storage, retry_for=1.0))
    app.testing = True
    return app.test_client()


def _http_api(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    body = {"task": "tasks.invoice", "unique_key": key, "on_conflict": on_conflict}
    refused = _web(target).post("/api/v1/jobs", json=body, headers={"Authorization": "Bearer x"})
    assert refused.status_code == 400, refused.data
    error = refused.get_json()["error"]
    assert error["code"] == "bad_request"
    return str(error["message"])


def _dashboard_form(target: Store, key: Any, on_conflict: Any, capsys: Any) -> str:
    web = _web(target)
    token = re.search(r'name="csrf_token" value="([^"]+)"', web.get("/jobs/new").text)
    assert token is not None
    form = {"csrf_token": token.group(1), "task": "tasks.invoice", "confirm": "yes",
            "countdown": "60", "unique_key": key, "on_conflict": on_conflict}  # fmt: skip
    refused = web.post("/jobs/new", data=form)
    assert refused.status_code == 400, refused.data
    shown = re.search(r'<p id="form-error" class="error">([^<]*)</p>', refused.text)
    assert shown is not None and 'id="schedule-result"' not in refused.text
    return str(html.unescape(shown.group(1)))


DOORS: dict[str, Callable[..., str]] = {
    "Client.schedule": _client,
    "Client.schedule_many": _schedule_many,
    "command line": _command_line,
    "apply_async": _celery,
    "HTTP API": _http_api,
    "dashboard form": _dashboard_form,
}
#: The command line's ``--on-conflict`` is a choice: argparse refuses another in its own words.
#: The form's empty key field means "no unique key": it schedules a plain job
#: (``test_the_form_takes_an_empty_key_as_a_plain_job``).
PAIRS = [
    (door, case)
    for door in DOORS
    for case in BAD
    if not (door == "command line" and case == "unknown on_conflict")
    and not (door == "dashboard form" and case == "empty key")
]


@pytest.mark.parametrize(("door", "case"), PAIRS)
def test_a_bad_unique_call_is_refused_in_the_same_words_at_every_door(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], door: str, case: str
) -> None:
    key, on_conflict = BAD[case]
    for target in opened(Store, adapter_kind, tmp_path):
        before = target.snapshot()
        assert DOORS[door](target, key, on_conflict, capsys) == expected(key, on_conflict)
        assert target.snapshot() == before


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["--log-level", "WARNING", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_the_command_line_says_created_kept_or_replaced(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        store = ["--storage-url", target.url, "--prefix", target.prefix]
        schedule = [*store, "schedule", "tasks.invoice", "--unique-key", "invoice-42", "--json"]
        code, first = _run([*schedule, "--countdown", "600", "--args", "[1]"], capsys)
        assert code == 0 and (first["created"], first["outcome"]) == (True, "created")
        code, kept = _run([*schedule, "--countdown", "60"], capsys)
        assert code == 0 and kept["id"] == first["id"]
        assert (kept["created"], kept["replaced"], kept["outcome"]) == (False, False, "kept")
        assert kept["due_at"] == first["due_at"]
        replace = [*schedule, "--countdown", "60", "--args", "[2]", "--on-conflict", "replace"]
        code, replaced = _run(replace, capsys)
        assert code == 0 and replaced["id"] == first["id"] and replaced["outcome"] == "replaced"
        assert replaced["due_at"] < first["due_at"]
        code, shown = _run([*store, "show", first["id"], "--json"], capsys)
        assert shown["unique_key"] == "invoice-42" and shown["args"] == [2]
        code, listed = _run([*store, "list", "--json"], capsys)
        assert [(row["id"], row["unique_key"]) for row in listed] == [(first["id"], "invoice-42")]
        capsys.readouterr()
        assert main([*store, "schedule", "tasks.invoice", "--unique-key", "invoice-42"]) == 0
        assert "holds the unique key: kept" in capsys.readouterr().out


def test_the_form_takes_an_empty_key_as_a_plain_job(adapter_kind: str, tmp_path: Path) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        web = _web(target)
        token = re.search(r'name="csrf_token" value="([^"]+)"', web.get("/jobs/new").text)
        assert token is not None
        form = {"csrf_token": token.group(1), "task": "tasks.invoice", "confirm": "yes",
                "countdown": "60", "unique_key": "", "on_conflict": "keep"}  # fmt: skip
        answer = web.post("/jobs/new", data=form)
        assert answer.status_code == 200 and 'data-outcome="created"' in answer.text
        made = re.search(r'<a id="result-job" href="[^"]*">([^<]+)</a>', answer.text)
        assert made is not None
        job = Client(target.storage).get(html.unescape(made.group(1)))
        assert job is not None and job.unique_key is None
