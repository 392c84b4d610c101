"""Bulk actions on the ticked jobs (cancel, run now, move by an offset) and creating a recurring
job from the dashboard (with the schedule in words and its next runs): POSTs that need the CSRF
token and a ticked confirmation, checked as the API checks them, each leaving an audit line."""

from __future__ import annotations

import logging
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from storage_adapters import JobState
from tests.dashboard.conftest import csrf_token

AUDIT = "parallel_scheduler.dashboard.audit"


def _job(client: Client, job_id: str) -> tuple[JobState, float]:
    job = client.get(job_id)
    assert job is not None
    return job.state, job.due_at.timestamp()


def test_bulk_actions_on_the_ticked_jobs(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    for n in range(4):
        client.schedule("t.a", countdown=600, job_id=f"b-{n}")
    page = web.get("/jobs").get_data(as_text=True)
    assert page.count('name="ids"') == 4 and 'form="bulk-selected-form"' in page
    token = csrf_token(web)
    base = {"csrf_token": token, "confirm": "yes", "state": "scheduled"}
    # Without the token, or unconfirmed, or with nothing ticked: refused, nothing changes
    assert web.post("/jobs/bulk", data={"action": "cancel", "ids": ["b-0"]}).status_code == 400
    unconfirmed = {**base, "confirm": "", "action": "cancel", "ids": ["b-0"]}
    assert web.post("/jobs/bulk", data=unconfirmed).status_code == 400
    assert web.post("/jobs/bulk", data={**base, "action": "cancel"}).status_code == 400
    assert (
        web.post("/jobs/bulk", data={**base, "action": "drop", "ids": ["b-0"]}).status_code == 400
    )
    assert _job(client, "b-0")[0] is JobState.SCHEDULED
    # Cancel two (one of them twice), run one now, move one an hour later
    done = web.post("/jobs/bulk", data={**base, "action": "cancel", "ids": ["b-0", "b-1", "b-1"]})
    assert done.status_code == 303 and done.headers["Location"].endswith("/jobs?state=scheduled")
    assert {_job(client, j)[0] for j in ("b-0", "b-1")} == {JobState.CANCELLED}
    assert "2 of 2 selected jobs cancelled" in web.get("/jobs").get_data(as_text=True)
    before = _job(client, "b-3")[1]
    web.post("/jobs/bulk", data={**base, "action": "run_now", "ids": ["b-2"]})
    assert _job(client, "b-2")[1] <= client.storage.now() + 1
    assert (
        web.post("/jobs/bulk", data={**base, "action": "shift", "ids": ["b-3"]}).status_code == 400
    )
    web.post("/jobs/bulk", data={**base, "action": "shift", "offset": "3600", "ids": ["b-3"]})
    assert _job(client, "b-3")[1] == pytest.approx(before + 3600, abs=0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT]
    assert [re.search(r"action=(\w+)", line).group(1) for line in lines] == [  # type: ignore[union-attr]
        "bulk_cancel",
        "bulk_run_now",
        "bulk_shift",
    ]
    assert "ids=b-0,b-1" in lines[0] and "offset=3600.0" in lines[2]


def test_read_only_shows_no_tick_box_and_refuses_bulk_and_create(
    make_app: object, client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="ro-1")
    app: Flask = make_app(read_only=True)  # type: ignore[operator]
    web = app.test_client()
    assert 'name="ids"' not in web.get("/jobs").get_data(as_text=True)
    assert 'id="recurring-new-form"' not in web.get("/recurring/new").get_data(as_text=True)
    assert web.post("/jobs/bulk", data={"action": "cancel", "ids": ["ro-1"]}).status_code == 403
    assert web.post("/recurring/new", data={"id": "x"}).status_code == 403


def test_create_a_recurring_job_with_a_preview_of_its_runs(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    token = csrf_token(web, "/recurring/new")
    form = {
        "csrf_token": token,
        "id": "nightly",
        "task": "reports.build",
        "args": '[1, "a"]',
        "kwargs": '{"format": "csv"}',
        "queue": "reports",
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "misfire_policy": "skip",
        "jitter": "30",
    }
    preview = web.post("/recurring/new", data={**form, "preview": "1"})
    body = preview.get_data(as_text=True)
    assert preview.status_code == 200 and client.recurring.get("nightly") is None
    assert "At 02:30 (Europe/Paris)" in body
    runs = re.findall(r'<li><span class="absolute">([^<]+)</span>', body)
    assert len(runs) == 5 and all(run.endswith(" 02:30:00") for run in runs)
    # Bad JSON, a bad zone, both or neither schedule: the form again, saying why; nothing saved
    for change, reason in (
        ({"args": "[1,"}, "args is not JSON"),
        ({"kwargs": "[1]"}, "kwargs must be a JSON object"),
        ({"timezone": "Mars/Base"}, "Mars/Base"),
        ({"every": "60"}, "one of the two"),
        ({"cron": "61 * * * *"}, "61 * * * *"),
        ({"jitter": "-5"}, "jitter must be from 0"),
        ({"jitter": "soon"}, "jitter"),
    ):
        refused = web.post("/recurring/new", data={**form, **change, "confirm": "yes"})
        text = refused.get_data(as_text=True)
        assert refused.status_code == 400 and 'id="form-error"' in text, change
        assert reason in text.replace("&#39;", "'"), (change, text[:300])
    assert client.recurring.get("nightly") is None
    assert web.post("/recurring/new", data=form).status_code == 400  # not confirmed
    made = web.post("/recurring/new", data={**form, "confirm": "yes"})
    assert made.status_code == 303
    saved = client.recurring.get("nightly")
    assert saved is not None and saved.task == "reports.build"
    assert (saved.args, saved.kwargs, saved.options) == (
        [1, "a"],
        {"format": "csv"},
        {"queue": "reports"},
    )
    assert (saved.schedule.cron, saved.schedule.timezone) == ("30 2 * * *", "Europe/Paris")
    assert saved.schedule.jitter == 30.0
    assert saved.schedule.misfire_policy == "skip"
    again = web.post("/recurring/new", data={**form, "confirm": "yes"})
    assert again.status_code == 400  # create never replaces
    assert any("action=recurring_create ids=nightly" in r.getMessage() for r in caplog.records)
    edit = web.get("/recurring/edit?id=nightly").get_data(as_text=True)
    assert 'id="schedule-words">At 02:30 (Europe/Paris)<' in edit
    assert len(re.findall(r'class="absolute next-run">[^<]+ 02:30:00<', edit)) == 5
    listing = web.get("/recurring").get_data(as_text=True)
    assert 'title="At 02:30 (Europe/Paris)"' in listing and 'id="new-recurring"' in listing
