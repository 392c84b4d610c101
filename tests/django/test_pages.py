"""The dashboard and its API under ``/scheduler/`` in the test project, behind Django's auth,
sessions and CSRF: who is let in, what the ``Scheduler`` permissions allow, Django's CSRF token
in the forms and the API, the admin log, the admin's look, and every link under the mount.

Driven by ``django.test.Client`` against the store of the project's settings (SQLite) and, for
one case, a PostgreSQL store on a prefix of its own.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from parallel_scheduler import Client
from parallel_scheduler.contrib.django import conf
from storage_adapters import JobState
from tests.conftest import POSTGRESQL_URL, require_server, unique_prefix

AUDIT = "parallel_scheduler.dashboard.audit"
PAGES = ("/scheduler/", "/scheduler/jobs", "/scheduler/recurring", "/scheduler/errors")
_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_LINK = re.compile(r'(?:href|action|src)="([^"]*)"')


@pytest.fixture
def store(django_db: tuple[str, ...]) -> Iterator[Client]:
    """The project's configured store (SQLite), read and written through ``conf``'s client."""
    conf.reset()
    client = conf.get_client()
    client.setup()
    yield client
    conf.reset()


@pytest.fixture
def make_user(django_db: tuple[str, ...]) -> Iterator[Callable[..., Any]]:
    """A user with a name of its own and the given ``Scheduler`` permissions, deleted at the
    end (with its admin log entries)."""
    from django.contrib.auth.models import Permission, User

    made: list[Any] = []

    def make(*codenames: str, staff: bool = True, superuser: bool = False) -> Any:
        user = User.objects.create_user(
            f"u-{uuid.uuid4().hex[:10]}",
            password="pw",
            is_staff=staff,
            is_superuser=superuser,
        )
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(
                    content_type__app_label="parallel_scheduler", codename=codename
                )
            )
        made.append(user)
        return User.objects.get(pk=user.pk)  # a fresh copy: no cached permissions

    yield make
    for user in made:
        user.delete()


def browser(user: Any = None) -> Any:
    """A Django test client that enforces CSRF as a real browser request is checked."""
    from django.test import Client as DjangoClient

    web = DjangoClient(enforce_csrf_checks=True)
    if user is not None:
        web.force_login(user)
    return web


def text(response: Any) -> str:
    return str(response.content.decode())


def form_token(web: Any, url: str) -> str:
    page = web.get(url)
    assert page.status_code == 200, text(page)
    found = _TOKEN.search(text(page))
    assert found is not None, "no form carries Django's CSRF token"
    return found.group(1)


def job_id() -> str:
    return f"dj-{uuid.uuid4().hex[:10]}"


def state(client: Client, jid: str) -> JobState:
    record = client.storage.get_job(jid)
    assert record is not None
    return record.state


def enabled(client: Client, recurring_id: str) -> bool:
    found = client.recurring.get(recurring_id)
    assert found is not None
    return found.enabled


def log_entries(user: Any) -> list[Any]:
    from django.contrib.admin.models import LogEntry

    return list(LogEntry.objects.filter(user_id=user.pk).order_by("pk"))


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT]


def test_anonymous_is_sent_to_the_admin_login_and_the_api_answers_401(
    store: Client,
) -> None:
    web = browser()
    for url in PAGES:
        refused = web.get(url)
        assert refused.status_code == 302
        assert refused["Location"].startswith("/admin/login/?next=/scheduler/")
    api = web.get("/scheduler/api/v1/jobs")
    assert api.status_code == 401 and api.json()["error"]["code"] == "unauthorized"


def test_non_staff_and_staff_without_a_permission_are_refused(
    store: Client, make_user: Callable[..., Any]
) -> None:
    outsider = browser(make_user("view_scheduler", staff=False))
    page = outsider.get("/scheduler/jobs")
    assert page.status_code == 302 and page["Location"].startswith("/admin/login/")
    assert outsider.get("/scheduler/api/v1/jobs").status_code == 403
    bare_staff = browser(make_user())
    assert bare_staff.get("/scheduler/jobs").status_code == 403
    refused = bare_staff.get("/scheduler/api/v1/jobs")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_view_only_sees_every_page_without_actions_and_every_change_is_refused(
    store: Client, make_user: Callable[..., Any]
) -> None:
    jid = job_id()
    store.schedule("t.view", countdown=600, job_id=jid)
    store.recurring.save(f"r-{jid}", "t.nightly", "30 2 * * *")
    viewer = make_user("view_scheduler")
    web = browser(viewer)
    urls = (*PAGES, f"/scheduler/jobs/detail?id={jid}", "/scheduler/outcomes")
    for url in urls:
        page = web.get(url)
        assert page.status_code == 200, (url, text(page))
        assert 'method="post"' not in text(page), url
    token = web.cookies["csrftoken"].value
    posts = {
        "/scheduler/jobs/action": {"id": jid, "action": "cancel", "confirm": "yes"},
        "/scheduler/recurring/action": {"id": f"r-{jid}", "action": "pause", "confirm": "yes"},
    }
    for url, form in posts.items():
        refused = web.post(url, {**form, "csrfmiddlewaretoken": token})
        assert refused.status_code == 403 and "permission" in text(refused)
    for url in (
        f"/scheduler/api/v1/jobs/{jid}/cancel",
        f"/scheduler/api/v1/recurring/r-{jid}/pause",
    ):
        api = web.post(url, HTTP_X_CSRFTOKEN=token)
        assert api.status_code == 403 and api.json()["error"]["code"] == "forbidden"
    assert state(store, jid) is JobState.SCHEDULED
    assert enabled(store, f"r-{jid}")
    assert log_entries(viewer) == []
    store.recurring.remove(f"r-{jid}")


def test_cancel_through_the_form_with_django_csrf_writes_the_admin_log(
    store: Client, make_user: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    from django.contrib.admin.models import CHANGE
    from django.contrib.contenttypes.models import ContentType

    from parallel_scheduler.contrib.django.models import Scheduler

    caplog.set_level(logging.INFO, logger=AUDIT)
    jid = job_id()
    store.schedule("t.cancel", countdown=600, job_id=jid)
    operator = make_user("change_jobs")
    web = browser(operator)
    token = form_token(web, f"/scheduler/jobs/detail?id={jid}")
    form = {"id": jid, "action": "cancel", "confirm": "yes"}
    # Given no CSRF token, then a forged one: Django refuses before the dashboard runs
    assert web.post("/scheduler/jobs/action", form).status_code == 403
    forged = {**form, "csrfmiddlewaretoken": "x" * 64}
    assert web.post("/scheduler/jobs/action", forged).status_code == 403
    assert state(store, jid) is JobState.SCHEDULED and audit_lines(caplog) == []
    # When the form carries Django's token
    done = web.post("/scheduler/jobs/action", {**form, "csrfmiddlewaretoken": token})
    # Then the job is cancelled, and both logs say who did what
    assert done.status_code == 303 and done["Location"] == f"/scheduler/jobs/detail?id={jid}"
    assert state(store, jid) is JobState.CANCELLED
    [line] = audit_lines(caplog)
    assert f"who={operator.username}@" in line and "action=cancel" in line and jid in line
    [entry] = log_entries(operator)
    assert entry.content_type == ContentType.objects.get_for_model(Scheduler)
    assert entry.action_flag == CHANGE and entry.object_id == jid
    assert entry.object_repr == f"cancel job {jid}"
    assert "done=True" in entry.change_message
    assert "cancelled" in text(web.get(done["Location"]))  # the dashboard's flash message


def test_job_permission_does_not_reach_recurring_jobs(
    store: Client, make_user: Callable[..., Any]
) -> None:
    rid = f"r-{job_id()}"
    store.recurring.save(rid, "t.nightly", "30 2 * * *")
    web = browser(make_user("change_jobs"))
    page = text(web.get("/scheduler/recurring"))
    assert rid in page and 'class="recurring-action' not in page
    token = web.cookies["csrftoken"].value
    form = {"id": rid, "action": "pause", "confirm": "yes", "csrfmiddlewaretoken": token}
    assert web.post("/scheduler/recurring/action", form).status_code == 403
    assert enabled(store, rid)
    store.recurring.remove(rid)


def test_the_api_with_the_session_and_django_csrf_header(
    store: Client, make_user: Callable[..., Any]
) -> None:
    jid = job_id()
    store.schedule("t.api", countdown=600, job_id=jid)
    operator = make_user("change_jobs")
    web = browser(operator)
    shown = web.get(f"/scheduler/api/v1/jobs/{jid}")
    assert shown.status_code == 200 and shown.json()["id"] == jid
    handed = web.get("/scheduler/api/v1/csrf-token").json()
    assert handed["header"] == "X-CSRFToken"
    without = web.post(f"/scheduler/api/v1/jobs/{jid}/cancel")
    assert without.status_code == 403 and state(store, jid) is JobState.SCHEDULED
    done = web.post(f"/scheduler/api/v1/jobs/{jid}/cancel", HTTP_X_CSRFTOKEN=handed["csrf_token"])
    assert done.status_code == 200, text(done)
    assert state(store, jid) is JobState.CANCELLED
    assert [entry.object_repr for entry in log_entries(operator)] == [f"api_cancel job {jid}"]
    spec = web.get("/scheduler/api/v1/openapi.json")
    assert spec.status_code == 200 and spec["Content-Type"] == "application/json"
    assert json.loads(spec.content)["servers"][0]["url"] == "/scheduler/api/v1"


def test_recurring_on_a_postgresql_store_with_a_superuser(
    django_db: tuple[str, ...], make_user: Callable[..., Any]
) -> None:
    from django.contrib.admin.models import DELETION
    from django.test import override_settings

    require_server("postgresql")
    rid = f"r-{job_id()}"
    with override_settings(
        PARALLEL_SCHEDULER={"storage_url": POSTGRESQL_URL, "prefix": unique_prefix()}
    ):
        conf.reset()
        client = conf.get_client()
        client.setup()
        try:
            client.recurring.save(rid, "t.nightly", "30 2 * * *")
            root = make_user(superuser=True)
            web = browser(root)
            token = form_token(web, "/scheduler/recurring")
            for action in ("pause", "remove"):
                form = {"id": rid, "action": action, "confirm": "yes", "note": "<i>quiet</i>"}
                done = web.post(
                    "/scheduler/recurring/action", {**form, "csrfmiddlewaretoken": token}
                )
                assert done.status_code == 303, text(done)
                if action == "pause":
                    assert not enabled(client, rid)
                    # who paused it is the Django user; the page shows the note as text
                    paused = client.recurring.get(rid)
                    assert paused is not None and paused.pause_note == "<i>quiet</i>"
                    assert (paused.paused_by or "").startswith(f"{root.get_username()}@")
                    page = text(web.get("/scheduler/recurring"))
                    assert "&lt;i&gt;quiet&lt;/i&gt;" in page and "<i>quiet" not in page
            assert client.recurring.get(rid) is None
            entries = log_entries(root)
            assert [e.object_repr for e in entries] == [
                f"recurring_pause recurring job {rid}",
                f"recurring_remove recurring job {rid}",
            ]
            assert entries[1].action_flag == DELETION
        finally:
            client.storage.drop()
            conf.reset()


def test_links_stay_under_the_mount_and_the_pages_wear_the_admin_look(
    store: Client, make_user: Callable[..., Any]
) -> None:
    jid = job_id()
    store.schedule("t.links", countdown=600, job_id=jid)
    web = browser(make_user("change_jobs", "change_recurring"))
    for url in (*PAGES, f"/scheduler/jobs/detail?id={jid}", "/scheduler/recurring/new"):
        page = web.get(url)
        body = text(page)
        links = [link for link in _LINK.findall(body) if link.startswith("/")]
        assert links, url
        outside = [
            link
            for link in links
            if not link.startswith(("/scheduler/", "/admin/", "/static/admin/css/"))
        ]
        assert outside == [], (url, outside)
        assert '<link rel="stylesheet" href="/static/admin/css/base.css">' in body
        assert "/scheduler/static/embedded.css" in body
        assert '<a id="site-name" href="/admin/">Django administration</a>' in body
        assert "style-src 'self'" in page["Content-Security-Policy"]
        assert page["Referrer-Policy"] == "same-origin"  # Django checks a POST's Origin
    css = web.get("/scheduler/static/embedded.css")
    assert css.status_code == 200 and b"var(--body-bg" in css.content


def test_the_admin_index_links_to_the_scheduler(
    store: Client, make_user: Callable[..., Any]
) -> None:
    web = browser(make_user("view_scheduler"))
    index = text(web.get("/admin/"))
    assert 'href="/admin/parallel_scheduler/scheduler/"' in index
    opened = web.get("/admin/parallel_scheduler/scheduler/")
    assert opened.status_code == 302 and opened["Location"] == "/scheduler/"
    other = browser(make_user())
    assert "/admin/parallel_scheduler/" not in text(other.get("/admin/"))


def test_bad_input_is_a_clear_400_and_writes_nothing(
    store: Client, make_user: Callable[..., Any]
) -> None:
    operator = make_user("change_jobs")
    web = browser(operator)
    jid = job_id()
    store.schedule("t.bad", countdown=600, job_id=jid)
    token = form_token(web, f"/scheduler/jobs/detail?id={jid}")
    form = {"id": jid, "action": "explode", "confirm": "yes", "csrfmiddlewaretoken": token}
    refused = web.post("/scheduler/jobs/action", form)
    assert refused.status_code == 400 and "explode" in text(refused)
    assert state(store, jid) is JobState.SCHEDULED and log_entries(operator) == []
    store.cancel(jid)


def test_an_embedded_dashboard_refuses_a_request_its_site_did_not_vouch_for(
    store: Client,
) -> None:
    from parallel_scheduler.dashboard import BasicAuth, create_app
    from parallel_scheduler.errors import InvalidJobError

    web = create_app(store, embedded=True).test_client()
    basic = {"Authorization": "Basic YWRtaW46cHc="}  # never honoured when embedded
    page = web.get("/jobs", headers=basic)
    assert page.status_code == 403 and "embedded" in page.get_data(as_text=True)
    api = web.post("/api/v1/jobs/x/cancel", headers=basic)
    assert api.status_code == 403 and api.get_json()["error"]["code"] == "forbidden"
    with pytest.raises(InvalidJobError, match="no auth"):
        create_app(store, embedded=True, auth=BasicAuth("admin", "pw"))


def test_pausing_a_queue_needs_the_job_permission_and_django_csrf(
    store: Client, make_user: Callable[..., Any]
) -> None:
    queue = f"q-{job_id()}"
    jid = job_id()
    store.schedule("t.pause", countdown=600, job_id=jid, queue=queue)
    form = {"kind": "queue", "name": queue, "note": "down", "confirm": "yes"}
    # A view-only user sees the page without its form, and is refused a pause
    viewer = browser(make_user("view_scheduler"))
    page = viewer.get("/scheduler/pauses")
    assert page.status_code == 200 and 'method="post"' not in text(page)
    token = viewer.cookies["csrftoken"].value
    refused = viewer.post("/scheduler/pauses/pause", {**form, "csrfmiddlewaretoken": token})
    assert refused.status_code == 403 and store.pauses() == []
    # An operator pauses it with Django's token, and the admin log names the queue
    operator = make_user("change_jobs")
    web = browser(operator)
    token = form_token(web, "/scheduler/pauses")
    assert web.post("/scheduler/pauses/pause", form).status_code == 403  # no token
    done = web.post("/scheduler/pauses/pause", {**form, "csrfmiddlewaretoken": token})
    assert done.status_code == 303 and done["Location"] == "/scheduler/pauses"
    assert state(store, jid) is JobState.HELD
    (pause,) = store.pauses()
    assert pause.paused_by.startswith(f"{operator.username}@")
    assert [entry.object_repr for entry in log_entries(operator)] == [f"pause_queue queue {queue}"]
    store.resume_queue(queue)
