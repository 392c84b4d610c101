"""A unique job's key on the dashboard (issue 25, item 3): the job page shows it, the HTTP API's
job and list answers carry it (``null`` for a plain job), as the OpenAPI ``Job`` schema says."""

from __future__ import annotations

import html

from flask.testing import FlaskClient

from parallel_scheduler import Client
from parallel_scheduler.dashboard.api.schemas import SCHEMAS

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes


def test_the_job_page_and_the_api_show_the_unique_key(web: FlaskClient, client: Client) -> None:
    unique = client.schedule("t.invoice", countdown=600, unique_key="invoice-42")
    client.schedule("t.invoice", countdown=600, job_id="plain-1")
    page = html.unescape(web.get(f"/jobs/detail?id={unique.job_id}").get_data(as_text=True))
    assert 'id="job-unique-key"' in page and "invoice-42" in page
    plain = web.get("/jobs/detail?id=plain-1").get_data(as_text=True)
    assert 'id="job-unique-key"' not in plain
    job = web.get(f"/api/v1/jobs/{unique.job_id}", headers=BEARER).get_json()
    assert job["unique_key"] == "invoice-42"
    listed = web.get("/api/v1/jobs", headers=BEARER).get_json()["jobs"]
    assert {row["id"]: row["unique_key"] for row in listed} == {
        unique.job_id: "invoice-42",
        "plain-1": None,
    }
    assert "unique_key" in SCHEMAS["Job"]["properties"]
