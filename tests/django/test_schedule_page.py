"""The "Schedule a job" form and ``POST /api/v1/jobs`` under the Django mount (issue 25, item 3):
a view-only user sees no form and is refused; a user with ``change_jobs`` schedules a unique job
with Django's CSRF token (none: refused before the dashboard runs), is told created, then kept,
with a link under the mount, and the admin log names the job."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from parallel_scheduler import Client
from tests.django.test_pages import browser, form_token, job_id, log_entries, make_user, store, text

__all__ = ["make_user", "store"]  # the fixtures, used by name

_LINK = re.compile(r'<a id="result-job" href="([^"]*)">([^<]+)</a>')


def test_scheduling_a_unique_job_through_the_mounted_form_and_api(
    store: Client, make_user: Callable[..., Any]
) -> None:
    task, key = f"t.{job_id()}", f"key-{job_id()}"
    form = {"task": task, "countdown": "600", "unique_key": key, "confirm": "yes"}
    viewer = browser(make_user("view_scheduler"))
    page = viewer.get("/scheduler/jobs/new")
    assert page.status_code == 200 and 'id="job-new-form"' not in text(page)
    token = viewer.cookies["csrftoken"].value
    refused = viewer.post("/scheduler/jobs/new", {**form, "csrfmiddlewaretoken": token})
    assert refused.status_code == 403 and "permission" in text(refused)
    api = viewer.post("/scheduler/api/v1/jobs", {"task": task}, "application/json",
                      HTTP_X_CSRFTOKEN=token)  # fmt: skip
    assert api.status_code == 403 and api.json()["error"]["code"] == "forbidden"
    operator = make_user("change_jobs")
    web = browser(operator)
    token = form_token(web, "/scheduler/jobs/new")
    assert web.post("/scheduler/jobs/new", form).status_code == 403  # no Django token
    made = web.post("/scheduler/jobs/new", {**form, "csrfmiddlewaretoken": token})
    assert made.status_code == 200 and 'data-outcome="created"' in text(made), text(made)
    link = _LINK.search(text(made))
    assert link is not None
    jid = html.unescape(link.group(2))
    assert html.unescape(link.group(1)) == f"/scheduler/jobs/detail?id={jid}"
    kept = web.post("/scheduler/jobs/new", {**form, "csrfmiddlewaretoken": token})
    assert 'data-outcome="kept"' in text(kept) and jid in text(kept)
    body = {"task": task, "unique_key": key, "countdown": 60, "on_conflict": "replace"}
    replaced = web.post("/scheduler/api/v1/jobs", body, "application/json",
                        HTTP_X_CSRFTOKEN=token)  # fmt: skip
    assert replaced.status_code == 200 and replaced.json()["outcome"] == "replaced"
    assert replaced.json()["id"] == jid
    assert [entry.object_repr for entry in log_entries(operator)] == [
        f"schedule job {jid}",
        f"schedule job {jid}",
        f"api_schedule job {jid}",
    ]
    assert store.cancel(jid)
