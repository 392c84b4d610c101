"""``pause_after_failures``'s doors (issue 25, §5) on every adapter: the command line, the HTTP
API, the dashboard's forms and ``beat_schedule`` set it, every listing shows it, and the same bad
value is refused in the same words at each of them with nothing written (the Client's own
refusals are in test_pause_after_failures.py). Also the API backfill's ``overlap``."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from html import unescape
from typing import Any

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import Client, InvalidJobError
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import Storage, list_jobs
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

AUTH = {"Authorization": "Bearer x"}
WORDS = "pause after failures must be a whole number from 1 to 20, not "
#: (value as JSON, value as typed, what the words end with)
BAD: list[tuple[Any, str, str]] = [
    (0, "0", "0"),
    (-1, "-1", "-1"),
    ("x", "x", "'x'"),
    (True, "True", "True"),
]


def _web(storage: Storage) -> FlaskClient:
    app = create_app(Client(storage))
    app.testing = True
    return app.test_client()


@pytest.mark.parametrize(("value", "typed", "shown"), BAD)
def test_the_command_line_refuses_a_bad_value(
    adapter_kind: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    value: Any,
    typed: str,
    shown: str,
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        command = ["recurring", "add", "r", "t.r", "--every", "60"]
        capsys.readouterr()
        base = ["--storage-url", target.url, "--prefix", target.prefix]
        code = main([*base, *command, f"--pause-after-failures={typed}"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
        assert WORDS + (shown if typed != "True" else "'True'") in err, err
        assert target.storage.count_recurring() == 0


@pytest.mark.parametrize(("value", "typed", "shown"), BAD)
def test_the_api_and_the_forms_refuse_a_bad_value(
    storage: Storage, value: Any, typed: str, shown: str
) -> None:
    web = _web(storage)
    body = {"id": "r", "task": "t.r", "every": 60, "pause_after_failures": value}
    answer = web.post("/api/v1/recurring", json=body, headers=AUTH)
    assert answer.status_code == 400, answer.get_json()
    assert WORDS + shown in answer.get_json()["error"]["message"]
    form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "r", "task": "t.r",
            "every": "60", "pause_after_failures": typed, "confirm": "yes"}  # fmt: skip
    page = web.post("/recurring/new", data=form)
    assert page.status_code == 400 and WORDS in unescape(page.get_data(as_text=True))
    assert storage.count_recurring() == 0
    # and an existing job is left as it is by a bad PUT, PATCH or edit form
    Client(storage).recurring.save("kept", "t.k", "* * * * *", pause_after_failures=3)
    put = {"task": "t.k", "cron": "* * * * *", "pause_after_failures": value}
    assert web.put("/api/v1/recurring/kept", json=put, headers=AUTH).status_code == 400
    patch = {"pause_after_failures": value}
    assert web.patch("/api/v1/recurring/kept", json=patch, headers=AUTH).status_code == 400
    edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=kept"), "id": "kept",
            "pause_after_failures": typed, "confirm": "yes"}  # fmt: skip
    edited = web.post("/recurring/edit", data=edit)
    assert edited.status_code == 400 and WORDS in unescape(edited.get_data(as_text=True))
    kept = Client(storage).recurring.get("kept")
    assert kept is not None and kept.schedule.pause_after_failures == 3


def test_it_is_set_shown_and_edited_everywhere(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        url = ["--storage-url", target.url, "--prefix", target.prefix]
        # Given a job added on the command line that pauses after 3 failures
        add = ["recurring", "add", "m", "t.m", "--cron", "* * * * *"]
        assert main([*url, *add, "--pause-after-failures", "3"]) == 0
        assert main([*url, "recurring", "add", "free", "t.f", "--every", "60"]) == 0
        # Then recurring list --json and show --json show it (null for a job without)
        capsys.readouterr()
        assert main([*url, "recurring", "list", "--json"]) == 0
        listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
        assert listed["m"]["pause_after_failures"] == 3
        assert listed["free"]["pause_after_failures"] is None
        assert main([*url, "recurring", "show", "m", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["pause_after_failures"] == 3
        assert main([*url, "recurring", "show", "m"]) == 0
        assert re.search(r"^pause_after_failures +3$", capsys.readouterr().out, re.MULTILINE)
        # and the API and the Recurring page show it
        web = _web(target.storage)
        one = web.get("/api/v1/recurring/m", headers=AUTH).get_json()
        assert one["pause_after_failures"] == 3
        assert "pause after 3 failures" in web.get("/recurring").get_data(as_text=True)
        # When a PATCH leaves it out it is kept; set, it changes; null removes it
        kept = web.patch("/api/v1/recurring/m", json={"task": "t.n"}, headers=AUTH).get_json()
        assert kept["pause_after_failures"] == 3
        five: dict[str, Any] = {"pause_after_failures": 5}
        changed = web.patch("/api/v1/recurring/m", json=five, headers=AUTH).get_json()
        assert changed["pause_after_failures"] == 5
        off: dict[str, Any] = {"pause_after_failures": None}
        removed = web.patch("/api/v1/recurring/m", json=off, headers=AUTH).get_json()
        assert removed["pause_after_failures"] is None
        # and a PUT and the edit form set it
        put = {"task": "t.m", "cron": "* * * * *", "pause_after_failures": 2}
        assert web.put("/api/v1/recurring/m", json=put, headers=AUTH).status_code == 200
        edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=m"), "id": "m",
                "pause_after_failures": "1", "confirm": "yes"}  # fmt: skip
        assert web.post("/recurring/edit", data=edit).status_code in (302, 303)
        job = Client(target.storage).recurring.get("m")
        assert job is not None and job.schedule.pause_after_failures == 1
        assert "pause after 1 failure" in web.get("/recurring").get_data(as_text=True)
        edit = {"csrf_token": csrf_token(web, "/recurring/edit?id=m"), "id": "m",
                "pause_after_failures": "", "confirm": "yes"}  # fmt: skip
        assert web.post("/recurring/edit", data=edit).status_code in (302, 303)
        job = Client(target.storage).recurring.get("m")
        assert job is not None and job.schedule.pause_after_failures is None
        assert "pause_after_failures" not in job.schedule.to_json()  # stored as before
        # and the new form creates one
        form = {"csrf_token": csrf_token(web, "/recurring/new"), "id": "n", "task": "t.n",
                "every": "60", "pause_after_failures": "4", "confirm": "yes"}  # fmt: skip
        assert web.post("/recurring/new", data=form).status_code in (302, 303)
        made = Client(target.storage).recurring.get("n")
        assert made is not None and made.schedule.pause_after_failures == 4


def test_the_doors_refuse_it_when_outcomes_are_off(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARALLEL_SCHEDULER_RECORD_OUTCOMES", "false")
    url = ["--storage-url", f"sqlite:///{tmp_path / 'off.db'}"]
    add = ["recurring", "add", "r", "t.r", "--every", "60", "--pause-after-failures", "3"]
    capsys.readouterr()
    assert main([*url, *add]) == 2
    words = "pause_after_failures=3 needs execution outcomes, and record_outcomes is off"
    assert words in capsys.readouterr().err
    assert main([*url, "recurring", "add", "a", "t.a", "--every", "60"]) == 0


def test_a_beat_entry_carries_it_and_a_bad_one_is_refused(storage: Storage) -> None:
    from celery import Celery

    from parallel_scheduler.celery.beat_sync import sync_beat_schedule

    app = Celery("failures-beat", broker="memory://")
    options = {"pause_after_failures": 3}
    app.conf.beat_schedule = {"nightly": {"task": "t.r", "schedule": 60.0, "options": options}}
    recurring = Client(storage).recurring
    assert sync_beat_schedule(app, recurring).saved == ["beat-nightly"]
    job = recurring.get("beat-nightly")
    assert job is not None and job.schedule.pause_after_failures == 3
    assert job.options == {}  # not a send option
    assert sync_beat_schedule(app, recurring).unchanged == ["beat-nightly"]
    app.conf.beat_schedule["nightly"]["options"] = {"pause_after_failures": 0}
    with pytest.raises(InvalidJobError, match=f"beat entry 'nightly': {WORDS}0"):
        sync_beat_schedule(app, recurring)
    kept = recurring.get("beat-nightly")
    assert kept is not None and kept.schedule.pause_after_failures == 3


def test_the_api_backfill_takes_overlap_allow_and_skip_and_refuses_buffer_one(
    storage: Storage,
) -> None:
    Client(storage).recurring.save("nightly", "t.n", "30 2 * * *", timezone="UTC")
    web = _web(storage)
    url = "/api/v1/recurring/nightly/backfill"
    low, high = datetime(2026, 3, 1, tzinfo=timezone.utc), datetime(2026, 3, 5, tzinfo=timezone.utc)
    body = {"from": low.isoformat(), "to": high.isoformat()}
    # buffer_one would hold the request open: refused, naming the command line; nothing written
    refused = web.post(url, json={**body, "overlap": "buffer_one"}, headers=AUTH)
    assert refused.status_code == 400, refused.get_json()
    message = refused.get_json()["error"]["message"]
    assert "recurring backfill --overlap buffer_one" in message, message
    bad = web.post(url, json={**body, "overlap": "sometimes"}, headers=AUTH)
    assert bad.status_code == 400, bad.get_json()
    assert "overlap must be one of allow, skip, buffer_one" in bad.get_json()["error"]["message"]
    assert list_jobs(storage, None, 100) == []
    # skip fires only the latest tick of the range
    skipped = web.post(url, json={**body, "overlap": "skip"}, headers=AUTH)
    assert skipped.status_code == 200, skipped.get_json()
    answer = skipped.get_json()
    assert answer == {"id": "nightly", "ticks": 4, "created": 1, "existing": 0, "skipped": 3}
    # and allow (the default, as before) fires the others
    allowed = web.post(url, json={**body, "overlap": "allow"}, headers=AUTH).get_json()
    assert allowed == {"id": "nightly", "ticks": 4, "created": 3, "existing": 1}


def test_recurring_import_sets_it_and_refuses_a_bad_one(
    adapter_kind: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        url = ["--storage-url", target.url, "--prefix", target.prefix]
        bad = tmp_path / "bad.jsonl"
        bad.write_text(
            '{"id": "a", "task": "t.a", "every": 60, "pause_after_failures": 2}\n'
            '{"id": "b", "task": "t.b", "every": 60, "pause_after_failures": 0}\n'
        )
        capsys.readouterr()
        assert main([*url, "recurring", "import", str(bad)]) == 2
        assert WORDS + "0" in capsys.readouterr().err
        assert target.storage.count_recurring() == 0
        good = tmp_path / "good.jsonl"
        good.write_text('{"id": "a", "task": "t.a", "every": 60, "pause_after_failures": 2}\n')
        assert main([*url, "recurring", "import", str(good)]) == 0
        job = Client(target.storage).recurring.get("a")
        assert job is not None and job.schedule.pause_after_failures == 2
