"""Overlap's doors (issue 25, §5 "Overlap") on every adapter: the command line, the HTTP API and
the dashboard's forms set ``overlap`` and ``overlap_timeout``, every listing shows them, and the
same bad value is refused in the same words at each of them with nothing written (the Client's
own refusals are in test_overlap.py)."""

from __future__ import annotations

import json
from html import unescape
from typing import Any

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import Client, InvalidJobError
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import Storage
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

AUTH = {"Authorization": "Bearer x"}
#: (field, value as JSON, value as typed, the words every door answers with)
BAD: list[tuple[str, Any, str, str]] = [
    ("overlap", "sometimes", "sometimes", "overlap must be one of allow, skip, buffer_one"),
    ("overlap_timeout", 0, "0", "overlap timeout must be from 1 to"),
    ("overlap_timeout", "soon", "soon", "overlap timeout must be a number of seconds, not 'soon'"),
]


def _web(storage: Storage) -> FlaskClient:
    app = create_app(Client(storage))
    app.testing = True
    return app.test_client()


@pytest.mark.parametrize(("field", "value", "typed", "words"), BAD)
def test_the_command_line_refuses_a_bad_overlap(
    adapter_kind: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Any,
    typed: str,
    words: str,
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        option = "--" + field.replace("_", "-")
        command = ["recurring", "add", "r", "t.r", "--every", "60", option, typed]
        capsys.readouterr()
        code = main(["--storage-url", target.url, "--prefix", target.prefix, *command])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
        assert words in err, err
        assert target.storage.count_recurring() == 0


@pytest.mark.parametrize(("field", "value", "typed", "words"), BAD)
def test_the_api_and_the_forms_refuse_a_bad_overlap(
    storage: Storage, field: str, value: Any, typed: str, words: str
) -> None:
    web = _web(storage)
    body = {"id": "r", "task": "t.r", "every": 60, "overlap": "skip", field: value}
    answer = web.post("/api/v1/recurring", json=body, headers=AUTH)
    assert answer.status_code == 400, answer.get_json()
    assert words in answer.get_json()["error"]["message"]
    form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "r", "task": "t.r",
            "every": "60", "overlap": "skip", field: typed, "confirm": "yes"}  # fmt: skip
    page = web.post("/recurring/new", data=form)
    assert page.status_code == 400 and words in unescape(page.get_data(as_text=True))
    assert storage.count_recurring() == 0
    # and an existing job is left as it is by a bad PUT, PATCH or edit form
    Client(storage).recurring.save("kept", "t.k", "* * * * *", overlap="skip")
    put = {"task": "t.k", "cron": "* * * * *", "overlap": "skip", field: value}
    assert web.put("/api/v1/recurring/kept", json=put, headers=AUTH).status_code == 400
    assert web.patch("/api/v1/recurring/kept", json={field: value}, headers=AUTH).status_code == 400
    edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=kept"), "id": "kept",
            field: typed, "confirm": "yes"}  # fmt: skip
    edited = web.post("/recurring/edit", data=edit)
    assert edited.status_code == 400 and words in unescape(edited.get_data(as_text=True))
    kept = Client(storage).recurring.get("kept")
    assert kept is not None
    assert (kept.schedule.overlap, kept.schedule.overlap_timeout) == ("skip", 3600.0)


def test_overlap_is_set_shown_and_edited_everywhere(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        url = ["--storage-url", target.url, "--prefix", target.prefix]
        # Given a job added on the command line with skip and a 600 s timeout
        add = ["recurring", "add", "m", "t.m", "--cron", "* * * * *", "--overlap", "skip"]
        assert main([*url, *add, "--overlap-timeout", "600"]) == 0
        # Then recurring list --json shows them, and a job without them shows the defaults
        assert main([*url, "recurring", "add", "free", "t.f", "--every", "60"]) == 0
        capsys.readouterr()
        assert main([*url, "recurring", "list", "--json"]) == 0
        listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
        assert (listed["m"]["overlap"], listed["m"]["overlap_timeout"]) == ("skip", 600.0)
        assert (listed["free"]["overlap"], listed["free"]["overlap_timeout"]) == ("allow", 3600.0)
        # and the text listing has an overlap column: "-" for allow (piped: tab-separated)
        assert main([*url, "recurring", "list"]) == 0
        header, *rows = (line.split("\t") for line in capsys.readouterr().out.splitlines())
        column = {row[0]: row[header.index("overlap")] for row in rows}
        assert column == {"free": "-", "m": "skip (timeout 600 s)"}
        # and the API and the Recurring page show them
        web = _web(target.storage)
        one = web.get("/api/v1/recurring/m", headers=AUTH).get_json()
        assert (one["overlap"], one["overlap_timeout"]) == ("skip", 600.0)
        assert "overlap skip" in web.get("/recurring").get_data(as_text=True)
        # When a PATCH changes the policy, the timeout is kept; one left out keeps both
        patched = web.patch("/api/v1/recurring/m", json={"overlap": "buffer_one"}, headers=AUTH)
        assert (patched.get_json()["overlap"], patched.get_json()["overlap_timeout"]) == (
            "buffer_one",
            600.0,
        )
        kept = web.patch("/api/v1/recurring/m", json={"task": "t.n"}, headers=AUTH).get_json()
        assert kept["overlap"] == "buffer_one"
        # and the edit form sets them back
        edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=m"), "id": "m",
                "overlap": "allow", "overlap_timeout": "", "confirm": "yes"}  # fmt: skip
        assert web.post("/recurring/edit", data=edit).status_code in (302, 303)
        job = Client(target.storage).recurring.get("m")
        assert job is not None
        assert (job.schedule.overlap, job.schedule.overlap_timeout) == ("allow", 3600.0)
        assert "overlap" not in job.schedule.to_json()  # stored as before overlap existed
        # and the new form creates one
        form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "n", "task": "t.n",
                "every": "60", "overlap": "buffer_one", "overlap_timeout": "90",
                "confirm": "yes"}  # fmt: skip
        assert web.post("/recurring/new", data=form).status_code in (302, 303)
        made = Client(target.storage).recurring.get("n")
        assert made is not None
        assert (made.schedule.overlap, made.schedule.overlap_timeout) == ("buffer_one", 90.0)


def test_the_command_line_refuses_overlap_when_outcomes_are_off(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARALLEL_SCHEDULER_RECORD_OUTCOMES", "false")
    url = ["--storage-url", f"sqlite:///{tmp_path / 'off.db'}"]
    add = ["recurring", "add", "r", "t.r", "--every", "60", "--overlap", "skip"]
    capsys.readouterr()
    assert main([*url, *add]) == 2
    assert "needs execution outcomes, and record_outcomes is off" in capsys.readouterr().err
    assert main([*url, "recurring", "add", "a", "t.a", "--every", "60"]) == 0


def test_a_beat_entry_carries_its_overlap_and_a_bad_one_is_refused(storage: Storage) -> None:
    from celery import Celery

    from parallel_scheduler.celery.beat_sync import sync_beat_schedule

    app = Celery("overlap-beat", broker="memory://")
    options = {"overlap": "buffer_one", "overlap_timeout": 600}
    app.conf.beat_schedule = {"nightly": {"task": "t.r", "schedule": 60.0, "options": options}}
    recurring = Client(storage).recurring
    assert sync_beat_schedule(app, recurring).saved == ["beat-nightly"]
    job = recurring.get("beat-nightly")
    assert job is not None
    assert (job.schedule.overlap, job.schedule.overlap_timeout) == ("buffer_one", 600.0)
    assert sync_beat_schedule(app, recurring).unchanged == ["beat-nightly"]
    app.conf.beat_schedule["nightly"]["options"] = {"overlap": "never"}
    with pytest.raises(InvalidJobError, match="beat entry 'nightly': overlap must be one of"):
        sync_beat_schedule(app, recurring)
    kept = recurring.get("beat-nightly")
    assert kept is not None and kept.schedule.overlap == "buffer_one"
