"""Actions from the UI change storage; without a confirmation, a CSRF token, or in read-only mode
they are refused and storage is left as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from parallel_scheduler import Client
from tests.browser.data import DataSet
from tests.browser.steps import follow

SERVERS = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgresql),
    pytest.param("redis", marks=pytest.mark.redis),
]


def _state(client: Client, job_id: str) -> str:
    job = client.get(job_id)
    assert job is not None, job_id
    return job.state.value


@pytest.mark.parametrize("store_url", SERVERS, indirect=True)
def test_cancel_a_job_from_the_ui_after_confirming(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    target = data.scheduled[3]
    page.goto(dashboard + "/jobs")
    follow(page, f"#jobs-table tr[data-job-id='{target}'] a.job-link")
    assert page.inner_text("#job-state") == "scheduled"
    # Unconfirmed: the browser will not submit the form while the box is unticked...
    page.click("#cancel-submit")
    assert page.locator("#cancel-form input[name=confirm]").evaluate("e => !e.validity.valid")
    assert _state(client, target) == "scheduled"
    # ... and the server refuses a submission that skips the box.
    page.locator("#cancel-confirm").evaluate("e => e.removeAttribute('required')")
    follow(page, "#cancel-submit")
    assert page.locator("#message").get_attribute("data-status") == "400"
    assert "not confirmed" in page.inner_text("#message")
    assert _state(client, target) == "scheduled"
    page.go_back()
    page.reload()
    page.check("#cancel-confirm")
    follow(page, "#cancel-submit")
    assert page.inner_text("#flashes") == f"job {target} cancelled"
    assert page.inner_text("#job-state") == "cancelled"
    assert page.locator("#cancel-form").count() == 0  # no action on a finished job
    assert _state(client, target) == "cancelled"
    others = [job_id for job_id in data.scheduled if job_id != target]
    assert {_state(client, job_id) for job_id in others} == {"scheduled"}


@pytest.mark.parametrize(
    "store_url", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)], indirect=True
)
def test_pause_a_recurring_job_from_the_ui(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    page.goto(dashboard + "/recurring")
    row = page.locator("#recurring-table tr[data-recurring-id='nightly-report']")
    pause = row.locator("form.recurring-action[data-action='pause']")
    pause.locator("summary").click()  # the note field opens from its pencil, to keep rows narrow
    pause.locator("input[name=note]").fill("DB migration <b>OPS-7</b>")
    pause.locator("input[name=confirm]").check()
    follow(page, pause.locator("button[type=submit]"))
    assert "nightly-report" in page.inner_text("#flashes")
    assert row.locator(".recurring-paused .badge-paused").inner_text() == "paused"
    # the note is shown as typed, as text (no <b> element), with who paused it
    assert row.locator(".recurring-paused .pause-note").inner_text() == "DB migration <b>OPS-7</b>"
    assert row.locator(".recurring-paused b").count() == 0
    assert row.locator(".recurring-paused .paused-by").inner_text().startswith("by ")
    assert row.locator("form.recurring-action[data-action='resume']").count() == 1
    paused = client.recurring.get("nightly-report")
    assert paused is not None and not paused.enabled
    assert paused.pause_note == "DB migration <b>OPS-7</b>" and paused.paused_at is not None
    other = client.recurring.get("health-ping")
    assert other is not None and other.enabled


def test_an_action_without_the_csrf_token_is_refused(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    target = data.scheduled[0]
    page.goto(dashboard + f"/jobs/detail?id={target}")
    token = page.locator("#cancel-form input[name=csrf_token]").input_value()
    assert len(token) >= 32
    # The page's own form with its token stripped, submitted by the browser.
    page.locator("#cancel-form input[name=csrf_token]").evaluate("e => e.remove()")
    page.check("#cancel-confirm")
    follow(page, "#cancel-submit")
    assert page.locator("#message").get_attribute("data-status") == "400"
    assert "CSRF" in page.inner_text("#message")
    assert _state(client, target) == "scheduled"
    # Requests with the browser's session cookie: no token, a wrong one, then the right one.
    action = dashboard + "/jobs/action"
    form = {"id": target, "action": "cancel", "confirm": "yes"}
    assert page.request.post(action, form=form, max_redirects=0).status == 400
    wrong = {**form, "csrf_token": token[::-1]}
    assert page.request.post(action, form=wrong, max_redirects=0).status == 400
    assert _state(client, target) == "scheduled"
    right = page.request.post(action, form={**form, "csrf_token": token}, max_redirects=0)
    assert right.status == 303  # the control: the same request with the token is obeyed
    assert _state(client, target) == "cancelled"


def test_read_only_mode_shows_no_action_and_refuses_posts(
    page: Any, serve: Callable[..., str], client: Client, data: DataSet
) -> None:
    url = serve(client, read_only=True)
    target = data.scheduled[0]
    for path in (
        "/",
        "/jobs",
        f"/jobs/detail?id={target}",
        "/recurring",
        "/errors",
        "/jobs?state=scheduled&task=mail.send_welcome",
    ):
        response = page.goto(url + path)
        assert response is not None and response.status == 200, path
        assert page.locator("#read-only-badge").is_visible(), path
        assert page.locator("form[method=post]").count() == 0, path
        assert page.locator("#job-actions, #bulk-cancel-link, a.edit-link").count() == 0, path
    refused = page.request.post(
        url + "/jobs/action",
        form={"id": target, "action": "cancel", "confirm": "yes"},
        max_redirects=0,
    )
    assert refused.status == 403
    assert "read-only" in refused.text()
    recurring = page.request.post(
        url + "/recurring/action",
        form={"id": "nightly-report", "action": "pause", "confirm": "yes"},
        max_redirects=0,
    )
    assert recurring.status == 403
    assert _state(client, target) == "scheduled"
    nightly = client.recurring.get("nightly-report")
    assert nightly is not None and nightly.enabled
