"""Actions from the dashboard change storage only when posted with the session's CSRF token and
a ticked confirmation, and each leaves one audit line naming who, what and which ids."""

from __future__ import annotations

import logging

import pytest
from flask.testing import FlaskClient

from parallel_scheduler import Client
from storage_adapters import JobState
from tests.dashboard.conftest import csrf_token

AUDIT = "parallel_scheduler.dashboard.audit"


def _state(client: Client, job_id: str) -> JobState:
    job = client.get(job_id)
    assert job is not None
    return job.state


def _audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT]


def test_cancel_needs_the_csrf_token_and_the_confirmation(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    client.schedule("t.a", countdown=600, job_id="c-1")
    form = {"id": "c-1", "action": "cancel", "confirm": "yes"}
    no_token = web.post("/jobs/action", data=form)
    assert no_token.status_code == 400 and "CSRF" in no_token.get_data(as_text=True)
    wrong = web.post("/jobs/action", data={**form, "csrf_token": "forged"})
    assert wrong.status_code == 400
    token = csrf_token(web, "/jobs/detail?id=c-1")
    unconfirmed = web.post(
        "/jobs/action", data={"id": "c-1", "action": "cancel", "csrf_token": token}
    )
    assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.get_data(as_text=True)
    assert _state(client, "c-1") is JobState.SCHEDULED and _audit_lines(caplog) == []
    done = web.post("/jobs/action", data={**form, "csrf_token": token})
    assert done.status_code == 303
    assert _state(client, "c-1") is JobState.CANCELLED
    [line] = _audit_lines(caplog)
    assert "action=cancel" in line and "ids=c-1" in line and "who=anonymous@" in line
    assert "cancelled" in web.get(done.headers["Location"]).get_data(as_text=True)


def test_reschedule_by_time_in_a_zone_by_seconds_and_run_now(
    web: FlaskClient, client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="r-1")
    token = csrf_token(web, "/jobs/detail?id=r-1")
    base = {"id": "r-1", "confirm": "yes", "csrf_token": token}
    moved = web.post(
        "/jobs/action",
        data={
            **base,
            "action": "reschedule",
            "when": "2030-03-18T02:46:40",
            "when_tz": "Asia/Tokyo",
        },
    )
    assert moved.status_code == 303
    job = client.get("r-1")
    assert job is not None and job.due_at.timestamp() == 1_900_000_000.0
    both = web.post(
        "/jobs/action",
        data={**base, "action": "reschedule", "when": "2030-01-01T00:00", "seconds": "5"},
    )
    assert both.status_code == 400 and "not both" in both.get_data(as_text=True)
    now = client.storage.now()
    web.post("/jobs/action", data={**base, "action": "reschedule", "seconds": "120"})
    job = client.get("r-1")
    assert job is not None and now + 100 < job.due_at.timestamp() < now + 200
    web.post("/jobs/action", data={**base, "action": "run_now"})
    job = client.get("r-1")
    assert job is not None and job.due_at.timestamp() <= client.storage.now()


def test_bulk_cancel_previews_then_cancels_the_filtered_set(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    for i in range(6):
        client.schedule("t.bulk" if i < 4 else "t.keep", countdown=600, job_id=f"b-{i}")
    preview = web.get("/jobs/bulk-cancel?task=t.bulk")
    assert 'data-count="4"' in preview.get_data(as_text=True)
    assert all(_state(client, f"b-{i}") is JobState.SCHEDULED for i in range(6))
    token = csrf_token(web, "/jobs/bulk-cancel?task=t.bulk")
    done = web.post(
        "/jobs/bulk-cancel", data={"task": "t.bulk", "confirm": "yes", "csrf_token": token}
    )
    assert done.status_code == 303
    states = [_state(client, f"b-{i}") for i in range(6)]
    assert states == [JobState.CANCELLED] * 4 + [JobState.SCHEDULED] * 2
    [line] = _audit_lines(caplog)
    assert "action=bulk_cancel" in line and "ids=b-0,b-1,b-2,b-3" in line
    refused = web.get("/jobs/bulk-cancel?state=cancelled")
    assert refused.status_code == 400 and "only scheduled" in refused.get_data(as_text=True)


def test_recurring_pause_resume_trigger_remove(web: FlaskClient, client: Client) -> None:
    client.recurring.save("every-min", "t.tick", "* * * * *")
    token = csrf_token(web, "/recurring")
    base = {"id": "every-min", "confirm": "yes", "csrf_token": token}

    def enabled() -> bool:
        found = client.recurring.get("every-min")
        assert found is not None
        return found.enabled

    assert web.post("/recurring/action", data={**base, "action": "pause"}).status_code == 303
    assert not enabled()
    assert 'data-action="resume"' in web.get("/recurring").get_data(as_text=True)
    web.post("/recurring/action", data={**base, "action": "resume"})
    assert enabled()
    web.post("/recurring/action", data={**base, "action": "trigger"})
    fired = [j for j in client.list(limit=100) if j.id.startswith("every-min@trigger-")]
    assert len(fired) == 1
    web.post("/recurring/action", data={**base, "action": "remove"})
    assert client.recurring.get("every-min") is None


def test_recurring_edit_shows_the_apis_validation_error_in_the_form(
    web: FlaskClient, client: Client
) -> None:
    client.recurring.save("nightly", "t.report", "0 2 * * *", queue="reports")
    token = csrf_token(web, "/recurring/edit?id=nightly")
    base = {"id": "nightly", "confirm": "yes", "csrf_token": token, "timezone": "UTC"}
    bad = web.post("/recurring/edit", data={**base, "cron": "61 * * * *"})
    body = bad.get_data(as_text=True)
    assert bad.status_code == 400 and 'id="form-error"' in body and "61 * * * *" in body
    bad_zone = web.post("/recurring/edit", data={**base, "cron": "0 3 * * *", "timezone": "Mars/X"})
    assert bad_zone.status_code == 400 and "Mars/X" in bad_zone.get_data(as_text=True)
    for machine_zone in ("localtime", "Factory", "posixrules"):  # keys, not IANA zones
        refused = web.post(
            "/recurring/edit", data={**base, "cron": "0 3 * * *", "timezone": machine_zone}
        )
        assert refused.status_code == 400, machine_zone
        assert f"time zone &#39;{machine_zone}&#39;" in refused.get_data(as_text=True)
    found = client.recurring.get("nightly")
    assert found is not None and found.schedule.cron == "0 2 * * *"
    good = web.post(
        "/recurring/edit", data={**base, "cron": "30 4 * * 1", "timezone": "Europe/Paris"}
    )
    assert good.status_code == 303
    found = client.recurring.get("nightly")
    assert found is not None
    assert (found.schedule.cron, found.schedule.timezone) == ("30 4 * * 1", "Europe/Paris")
    assert found.options == {"queue": "reports"} and found.task == "t.report"


def test_bulk_preview_counts_to_its_bound_and_the_cancel_takes_the_whole_set(
    web: FlaskClient, client: Client
) -> None:
    from parallel_scheduler.jobs import JobSpec

    client.schedule_many(JobSpec("t.many", countdown=600, id=f"m-{i:04d}") for i in range(1005))
    preview = web.get("/jobs/bulk-cancel").get_data(as_text=True)
    assert 'data-count="1000" data-more="yes"' in preview and "At least 1000" in preview
    token = csrf_token(web, "/jobs/bulk-cancel")
    web.post("/jobs/bulk-cancel", data={"confirm": "yes", "csrf_token": token})
    assert client.counts()["cancelled"] == 1005 and client.counts()["scheduled"] == 0
