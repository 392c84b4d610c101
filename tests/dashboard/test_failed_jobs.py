"""Jobs set aside as failed (they could not be sent after every attempt allowed) on the
dashboard: the errors page lists them with their last error, their page offers Run now and
Reschedule (not Cancel), and Run now queues one again with its attempts reset. A failed job
whose stored arguments do not even decode is shown, never a server error."""

from __future__ import annotations

from flask.testing import FlaskClient

from parallel_scheduler import Client
from storage_adapters import JobState, NewJob
from tests.dashboard.conftest import csrf_token

TOO_DEEP = '{"args":[' + "[" * 100_000 + "]" * 100_000 + '],"kwargs":{},"options":{}}'


def failed(client: Client, job_id: str, payload: str, error: str) -> None:
    """A job stored, claimed and set aside as failed with ``error``."""
    storage = client.storage
    storage.add_jobs([NewJob(job_id, "t.poison", payload, storage.now() - 1)])
    lock = storage.acquire_lock(f"dash-test-{job_id}", "tester", 30)
    assert lock is not None
    claim = storage.claim(job_id, lock, 30)
    assert claim is not None
    assert storage.fail([claim], error) == [job_id]


def test_the_errors_page_lists_failed_jobs_with_their_last_error(
    web: FlaskClient, client: Client
) -> None:
    failed(client, "too-deep", TOO_DEEP, "cannot be sent: its stored arguments do not decode")
    failed(client, "unroutable", '{"args":[],"kwargs":{},"options":{}}', "no such exchange")
    page = web.get("/errors")
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    table = body[body.index('id="failed-table"') : body.index('id="expired-table"')]
    assert 'data-job-id="too-deep"' in table and 'data-job-id="unroutable"' in table
    assert "its stored arguments do not decode" in table and "no such exchange" in table
    listing = web.get("/jobs?state=failed")
    assert listing.status_code == 200 and 'data-job-id="too-deep"' in listing.get_data(as_text=True)
    detail = web.get("/jobs/detail?id=too-deep")
    assert detail.status_code == 200 and "failed" in detail.get_data(as_text=True)


def test_run_now_queues_a_failed_job_again_with_its_attempts_reset(
    web: FlaskClient, client: Client
) -> None:
    failed(client, "f-1", '{"args":[1],"kwargs":{},"options":{}}', "no such exchange")
    detail = web.get("/jobs/detail?id=f-1").get_data(as_text=True)
    assert 'id="run-now-form"' in detail or "run_now" in detail
    assert 'id="reschedule-form"' in detail
    assert 'value="cancel"' not in detail
    token = csrf_token(web, "/jobs/detail?id=f-1")
    done = web.post(
        "/jobs/action",
        data={"id": "f-1", "action": "run_now", "confirm": "yes", "csrf_token": token},
    )
    assert done.status_code == 303
    job = client.storage.get_job("f-1")
    assert job is not None and job.state is JobState.SCHEDULED and job.attempts == 0
    assert client.storage.fetch_due_ids(10) == ["f-1"]
