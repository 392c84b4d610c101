"""The dashboard's Pauses page and ``/api/v1/pauses`` on every adapter: the pauses in force with
their note (escaped), who paused and since when (in the viewer's zone); the pause form and the
Resume buttons (CSRF and a ticked box, an audit line, a message of how many jobs were held or
released); the API's list, create (201 with the held count) and delete (404 when not paused);
held jobs shown with their queue on the job page and counted on the Overview."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client, JobSpec, JobState
from tests.dashboard.conftest import csrf_token

AUDIT = "parallel_scheduler.dashboard.audit"
BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes


def _text(response: object) -> str:
    return html.unescape(response.get_data(as_text=True))  # type: ignore[attr-defined]


def _seed(client: Client) -> None:
    client.schedule_many(
        [
            JobSpec("mail.send", id="m1", options={"queue": "emails"}),
            JobSpec("mail.send", id="m2", options={"queue": "emails"}, countdown=600),
            JobSpec("report.build", id="r1"),
        ]
    )


def test_the_pause_form_holds_the_jobs_and_resume_releases_them(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    _seed(client)
    page = web.get("/pauses")
    assert page.status_code == 200 and 'id="nav-pauses"' in page.get_data(as_text=True)
    assert 'id="no-pauses"' in page.get_data(as_text=True)
    token = csrf_token(web, "/pauses")
    form = {"kind": "queue", "name": "emails", "note": "smtp <b>down</b>", "confirm": "yes"}
    # Refused without the CSRF token, or without the ticked box: nothing written
    assert web.post("/pauses/pause", data=form).status_code == 400
    assert web.post("/pauses/pause", data={**form, "csrf_token": "forged"}).status_code == 400
    unticked = {k: v for k, v in form.items() if k != "confirm"}
    refused = web.post("/pauses/pause", data={**unticked, "csrf_token": token})
    assert refused.status_code == 400 and "confirm" in _text(refused)
    assert client.pauses() == []
    # When posted whole, the queue is paused, said in a message, and audited
    done = web.post("/pauses/pause", data={**form, "csrf_token": token})
    assert done.status_code == 303
    shown = web.get(done.headers["Location"]).get_data(as_text=True)
    assert "paused queue &#39;emails&#39;: 2 scheduled jobs held" in shown
    assert "smtp &lt;b&gt;down&lt;/b&gt;" in shown and "<b>down" not in shown  # escaped
    assert "anonymous@" in shown and '<time class="when"' in shown
    (pause,) = client.pauses()
    assert (pause.name, pause.note, pause.paused_by) == (
        "emails",
        "smtp <b>down</b>",
        pause.paused_by,
    )
    assert pause.paused_by.startswith("anonymous@")
    assert {job.id for job in client.list(JobState.HELD)} == {"m1", "m2"}
    # and the Resume button releases them
    resume = {"kind": "queue", "name": "emails", "confirm": "yes", "csrf_token": token}
    assert (
        web.post(
            "/pauses/resume", data={k: v for k, v in resume.items() if k != "csrf_token"}
        ).status_code
        == 400
    )
    done = web.post("/pauses/resume", data=resume)
    assert done.status_code == 303
    assert "resumed queue &#39;emails&#39;: 2 held jobs scheduled again" in web.get(
        done.headers["Location"]
    ).get_data(as_text=True)
    assert client.pauses() == [] and client.list(JobState.HELD) == []
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT]
    assert any("action=pause_queue ids=emails held=2" in line for line in lines), lines
    assert any("action=resume_queue ids=emails released=2" in line for line in lines), lines


def test_the_page_shows_each_pause_in_the_viewers_zone(web: FlaskClient, client: Client) -> None:
    client.pause_task("report.build", note="quarter end", by="ops@h1")
    page = web.get("/pauses?tz=Asia/Tokyo").get_data(as_text=True)
    row = re.search(
        r'<tr class="pause-row" data-kind="task" data-name="report.build">(.*?)</tr>', page, re.S
    )
    assert row is not None, page
    assert "quarter end" in row.group(1) and "ops@h1" in row.group(1)
    assert re.search(
        r'<time class="when" datetime="[^"]+\+00:00" title="[^"]+\+09:00">', row.group(1)
    )
    # its name links to its held jobs
    assert "/jobs?state=held&amp;task=report.build" in row.group(1)


def test_read_only_shows_the_pauses_but_no_form(
    make_app: Callable[..., Flask], client: Client
) -> None:
    client.pause_queue("emails", by="ops")
    web = make_app(read_only=True).test_client()
    page = web.get("/pauses").get_data(as_text=True)
    assert "emails" in page and 'id="pause-form"' not in page and "resume-form" not in page
    refused = web.post("/pauses/resume", data={"kind": "queue", "name": "emails", "confirm": "yes"})
    assert refused.status_code == 403
    assert [p.name for p in client.pauses()] == ["emails"]


def test_a_held_job_shows_its_state_queue_and_actions(web: FlaskClient, client: Client) -> None:
    _seed(client)
    client.pause_queue("emails")
    page = _text(web.get("/jobs/detail?id=m1"))
    assert 'data-state="held"' in page and 'id="job-held-by"' in page
    assert re.search(r'id="job-queue"><code[^>]*>emails</code>', page)
    assert 'id="cancel-form"' in page and 'id="reschedule-form"' in page
    assert 'id="run-now-form"' not in page
    other = _text(web.get("/jobs/detail?id=r1"))
    assert 'id="job-queue"><span class="hint"' in other
    listing = web.get("/jobs?state=held").get_data(as_text=True)
    assert 'data-job-id="m1"' in listing and 'data-job-id="r1"' not in listing
    assert '<option value="held" selected>held</option>' in listing
    overview = web.get("/").get_data(as_text=True)
    assert re.search(r'id="count-held">.*?<td class="num">2</td>', overview, re.S)
    assert re.search(r'id="pause-count"><a href="/pauses">1</a>', overview)


def test_the_api_lists_creates_and_deletes_pauses(web: FlaskClient, client: Client) -> None:
    _seed(client)
    assert web.get("/api/v1/pauses").get_json() == {"pauses": []}
    made = web.post(
        "/api/v1/pauses", json={"kind": "queue", "name": "emails", "note": "n"}, headers=BEARER
    )
    assert made.status_code == 201
    assert made.get_json() == {"kind": "queue", "name": "emails", "held": 2}
    (listed,) = web.get("/api/v1/pauses").get_json()["pauses"]
    assert listed["kind"] == "queue" and listed["note"] == "n"
    assert listed["paused_by"] == "anonymous@127.0.0.1" and listed["paused_at"].endswith("+00:00")
    job = web.get("/api/v1/jobs/m1").get_json()
    assert (job["state"], job["queue"]) == ("held", "emails")
    # a task name with a slash is named in the path
    client.pause_task("a/b")
    gone = web.delete("/api/v1/pauses/task/a%2Fb", headers=BEARER)
    assert gone.status_code == 200 and gone.get_json() == {
        "kind": "task",
        "name": "a/b",
        "released": 0,
    }
    done = web.delete("/api/v1/pauses/queue/emails", headers=BEARER)
    assert done.status_code == 200
    assert done.get_json() == {"kind": "queue", "name": "emails", "released": 2}
    again = web.delete("/api/v1/pauses/queue/emails", headers=BEARER)
    assert again.status_code == 404 and again.get_json()["error"]["code"] == "not_found"
    status = web.get("/api/v1/status").get_json()
    assert status["pauses"] == [] and status["counts"]["held"] == 0


def test_a_browser_session_needs_the_csrf_header_for_the_api(
    web: FlaskClient, client: Client
) -> None:
    body = {"kind": "task", "name": "mail.send"}
    refused = web.post("/api/v1/pauses", json=body)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "csrf"
    assert client.pauses() == []
    token = web.get("/api/v1/csrf-token").get_json()["csrf_token"]
    assert web.post("/api/v1/pauses", json=body, headers={"X-CSRF-Token": token}).status_code == 201
    unknown = web.post("/api/v1/pauses", json={**body, "by": "x"}, headers=BEARER)
    assert unknown.status_code == 400 and "'by'" in unknown.get_json()["error"]["message"]
