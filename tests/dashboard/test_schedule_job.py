"""Scheduling one job from the dashboard (issue 25, item 3): ``POST /api/v1/jobs`` answers 201
when it created the job and 200 when an existing id or a unique key's holder answered (kept or
replaced), in the command line's ``--json`` shape; the "Schedule a job" form says the same in
words with a link to the job; both need the CSRF token (or a bearer token) and write nothing
in read-only mode; the OpenAPI document describes the operation."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from parallel_scheduler.dashboard.api.openapi import document
from tests.dashboard.conftest import csrf_token

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes
_LINK = re.compile(r'<a id="result-job" href="([^"]*)">([^<]+)</a>')


def _jobs(client: Client) -> int:
    return sum(client.storage.count_by_state().values())


def test_the_api_creates_keeps_and_replaces(web: FlaskClient, client: Client) -> None:
    body = {"task": "t.invoice", "args": [1], "countdown": 600, "unique_key": "invoice-42"}
    first = web.post("/api/v1/jobs", json=body, headers=BEARER)
    assert first.status_code == 201, first.get_json()
    made = first.get_json()
    assert (made["created"], made["replaced"], made["outcome"]) == (True, False, "created")
    kept = web.post("/api/v1/jobs", json={**body, "countdown": 60}, headers=BEARER)
    assert kept.status_code == 200 and kept.get_json()["id"] == made["id"]
    assert (kept.get_json()["outcome"], kept.get_json()["due_at"]) == ("kept", made["due_at"])
    moved = {**body, "args": [2], "countdown": 60, "on_conflict": "replace", "queue": "billing"}
    replaced = web.post("/api/v1/jobs", json=moved, headers=BEARER)
    assert replaced.status_code == 200 and replaced.get_json()["id"] == made["id"]
    assert replaced.get_json()["outcome"] == "replaced" and replaced.get_json()["replaced"]
    assert replaced.get_json()["due_at"] < made["due_at"]
    job = client.get(made["id"])
    assert job is not None and job.args == [2] and job.unique_key == "invoice-42"
    assert job.options.get("queue") == "billing" and _jobs(client) == 1
    plain = web.post("/api/v1/jobs", json={"task": "t.plain", "id": "p-1"}, headers=BEARER)
    assert plain.status_code == 201 and plain.get_json() == {
        "id": "p-1",
        "created": True,
        "due_at": plain.get_json()["due_at"],
    }
    again = web.post("/api/v1/jobs", json={"task": "t.plain", "id": "p-1"}, headers=BEARER)
    assert again.status_code == 200 and again.get_json()["created"] is False
    shown = web.get(f"/api/v1/jobs/{made['id']}", headers=BEARER).get_json()
    assert shown["unique_key"] == "invoice-42" and shown["args"] == [2]


def test_the_api_refuses_bad_input_and_writes_nothing(web: FlaskClient, client: Client) -> None:
    bad: tuple[tuple[dict[str, object], str], ...] = (
        ({"args": []}, "task: the task name is required"),
        ({"task": "t.a", "colour": "red"}, "unknown field(s) 'colour'"),
        ({"task": "t.a", "args": {}}, "args must be a list"),
        ({"task": "t.a", "unique_key": 7}, "unique_key must be a string of 1-255 characters"),
        ({"task": "t.a", "unique_key": "k", "on_conflict": 1}, "on_conflict must be 'keep'"),
        ({"task": "t.a", "eta": "soon"}, "eta 'soon' is not an ISO 8601 date-time"),
        ({"task": "t.a", "eta": "2030-01-01T00:00:00Z", "countdown": 5}, "eta"),
    )
    for body, words in bad:
        refused = web.post("/api/v1/jobs", json=body, headers=BEARER)
        assert refused.status_code == 400, (body, refused.get_json())
        assert words in refused.get_json()["error"]["message"], (body, refused.get_json())
    assert _jobs(client) == 0


def test_the_api_needs_the_csrf_token_or_a_bearer_and_read_only_refuses(
    make_app: Callable[..., Flask], client: Client
) -> None:
    web = make_app().test_client()
    body = {"task": "t.a", "unique_key": "k-1"}
    refused = web.post("/api/v1/jobs", json=body)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "csrf"
    token = web.get("/api/v1/csrf-token").get_json()["csrf_token"]
    assert web.post("/api/v1/jobs", json=body, headers={"X-CSRF-Token": token}).status_code == 201
    locked = make_app(read_only=True).test_client()
    refused = locked.post("/api/v1/jobs", json={**body, "unique_key": "k-2"}, headers=BEARER)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "read_only"
    assert _jobs(client) == 1


def _post_form(web: FlaskClient, **fields: str) -> tuple[int, str]:
    form = {"csrf_token": csrf_token(web, "/jobs/new"), "confirm": "yes", **fields}
    answer = web.post("/jobs/new", data=form)
    return answer.status_code, answer.get_data(as_text=True)


def test_the_form_says_created_kept_or_replaced_with_a_link(
    web: FlaskClient, client: Client
) -> None:
    assert 'id="new-job"' in web.get("/jobs").get_data(as_text=True)
    fields = {"task": "t.invoice", "args": "[1]", "countdown": "600", "unique_key": "inv<42>"}
    status, page = _post_form(web, **fields)
    assert status == 200 and 'data-outcome="created"' in page and "inv<42>" not in page
    link = _LINK.search(page)
    assert link is not None
    job_id = html.unescape(link.group(2))
    assert html.unescape(link.group(1)).endswith(f"/jobs/detail?id={job_id}")
    status, page = _post_form(web, **{**fields, "countdown": "60"})
    assert status == 200 and 'data-outcome="kept"' in page and "kept (unchanged)" in page
    assert html.unescape(_LINK.search(page).group(2)) == job_id  # type: ignore[union-attr]
    moved = {**fields, "args": "[2]", "countdown": "60", "on_conflict": "replace"}
    status, page = _post_form(web, **moved)
    assert status == 200 and 'data-outcome="replaced"' in page
    job = client.get(job_id)
    assert job is not None and job.args == [2] and job.unique_key == "inv<42>"
    assert _jobs(client) == 1
    detail = web.get(f"/jobs/detail?id={job_id}")
    assert detail.status_code == 200


def test_the_form_needs_csrf_and_confirmation_and_read_only_has_none(
    make_app: Callable[..., Flask], web: FlaskClient, client: Client
) -> None:
    fields = {"task": "t.a", "unique_key": "k-1", "confirm": "yes"}
    assert web.post("/jobs/new", data=fields).status_code == 400
    status, page = _post_form(web, task="t.a", unique_key="k-1", confirm="")
    assert status == 400 and "not confirmed" in page
    status, page = _post_form(web, task="t.a", args="[1", unique_key="k-1")
    assert status == 400 and 'id="form-error"' in page and 'value="k-1"' in page
    locked = make_app(read_only=True).test_client()
    assert 'id="job-new-form"' not in locked.get("/jobs/new").get_data(as_text=True)
    assert 'id="new-job"' not in locked.get("/jobs").get_data(as_text=True)
    assert locked.post("/jobs/new", data=fields).status_code == 403
    assert _jobs(client) == 0


def test_the_openapi_document_describes_scheduling() -> None:
    operation = document("/api/v1")["paths"]["/jobs"]["post"]
    assert {"200", "201", "400", "403"} <= set(operation["responses"])
    schemas = document("/api/v1")["components"]["schemas"]
    assert {"unique_key", "on_conflict"} <= set(schemas["ScheduleJob"]["properties"])
    assert schemas["ScheduleJob"]["properties"]["on_conflict"]["enum"] == ["keep", "replace"]
