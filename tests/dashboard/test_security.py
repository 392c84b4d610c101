"""Security: auth (401), read-only (no action shown, every POST 403), response headers, no
secret on any page, and bad input anywhere gives a clear 4xx, never a 500."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask

from parallel_scheduler import Client
from parallel_scheduler.dashboard import BasicAuth, TokenAuth, create_app
from storage_adapters import JobState
from tests.dashboard.conftest import csrf_token, session_token

PAGES = ("/", "/jobs", "/jobs?state=any", "/recurring", "/errors", "/jobs/detail?id=s-1")


def _basic(user: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def test_basic_auth_is_required_on_every_page(make_app: Callable[..., Flask]) -> None:
    web = make_app(auth=BasicAuth("admin", "s3cret:pw")).test_client()
    for url in PAGES:
        refused = web.get(url)
        assert refused.status_code == 401 and "Basic" in refused.headers["WWW-Authenticate"]
    assert web.get("/", headers=_basic("admin", "wrong")).status_code == 401
    assert web.get("/", headers=_basic("other", "s3cret:pw")).status_code == 401
    assert web.get("/", headers={"Authorization": "Basic !!notbase64"}).status_code == 401
    assert web.get("/", headers=_basic("admin", "s3cret:pw")).status_code == 200
    assert web.post("/jobs/action", data={}).status_code == 401  # before anything else


def test_bearer_token_or_token_as_basic_password(make_app: Callable[..., Flask]) -> None:
    web = make_app(auth=TokenAuth("tok-1234567")).test_client()
    assert web.get("/").status_code == 401
    assert web.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert web.get("/", headers={"Authorization": "Bearer tok-1234567"}).status_code == 200
    assert web.get("/", headers=_basic("me", "tok-1234567")).status_code == 200


def test_read_only_shows_no_action_and_refuses_every_post(
    make_app: Callable[..., Flask], client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="s-1")
    client.recurring.save("nightly", "t.r", "0 2 * * *")
    web = make_app(read_only=True).test_client()
    for url in (*PAGES, "/jobs/bulk-cancel", "/recurring/edit?id=nightly"):
        body = web.get(url).get_data(as_text=True)
        assert 'method="post"' not in body, url
        assert 'id="bulk-cancel-link"' not in body
    assert 'id="read-only-badge"' in web.get("/").get_data(as_text=True)
    token = session_token(web)
    for url, form in (
        ("/jobs/action", {"id": "s-1", "action": "cancel"}),
        ("/jobs/bulk-cancel", {}),
        ("/recurring/action", {"id": "nightly", "action": "pause"}),
        ("/recurring/edit", {"id": "nightly", "cron": "0 3 * * *"}),
    ):
        refused = web.post(url, data={**form, "confirm": "yes", "csrf_token": token})
        assert refused.status_code == 403, url
    job = client.get("s-1")
    recurring = client.recurring.get("nightly")
    assert job is not None and job.state is JobState.SCHEDULED
    assert recurring is not None and recurring.enabled and recurring.schedule.cron == "0 2 * * *"


def test_security_headers_on_every_response(make_app: Callable[..., Flask]) -> None:
    web = make_app().test_client()
    for response in (web.get("/"), web.get("/jobs?state=bogus"), web.post("/jobs/action")):
        csp = response.headers["Content-Security-Policy"]
        # one script, served by the app itself (static/live.js): never inline, never elsewhere
        assert "script-src 'self';" in csp and "unsafe" not in csp and "default-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
    cookie = web.get("/").headers.get("Set-Cookie") or ""
    assert "HttpOnly" in cookie or web.get_cookie("parallel_scheduler_dashboard") is not None


@pytest.mark.postgresql
def test_no_page_shows_the_storage_password(tmp_path: Path) -> None:
    from tests.conftest import POSTGRESQL_URL, require_server, unique_prefix

    require_server("postgresql")
    url = POSTGRESQL_URL.replace("postgres@", "postgres:Hunter2-secret@")  # trust: any password
    assert "Hunter2-secret" in url
    client = Client(storage_url=url, prefix=unique_prefix(), retry_for=1.0)
    try:
        client.setup()
        client.schedule("t.a", countdown=600, job_id="s-1")
        web = create_app(client).test_client()
        for url_path in PAGES:
            page = web.get(url_path)
            assert page.status_code in (200, 404)
            assert "Hunter2-secret" not in page.get_data(as_text=True), url_path
        assert "***" in web.get("/").get_data(as_text=True)
    finally:
        client.storage.drop()
        client.close()


BAD_VALUES = (
    "",
    " ",
    "x" * 5000,
    "\x00",
    "\x1b[31m",
    "-1",
    "1e400",
    "nan",
    "inf",
    "9999-12-31T23:59:59",
    "0000-01-01",
    "<script>",
    "%s%s%s",
    "2030-13-45T25:61",
    ":",
    "1:",
    "nan:x",
    "1.0:" + "z" * 300,
    "😀",
)
GET_PARAMS = {
    "/jobs": (
        "state",
        "task",
        "queue",
        "error",
        "due_from",
        "due_to",
        "after",
        "limit",
        "id",
        "tz",
    ),
    "/jobs/detail": ("id", "tz"),
    "/jobs/bulk-cancel": ("state", "task", "due_from", "queue"),
    "/recurring": ("offset",),
    "/recurring/edit": ("id",),
    "/": ("tz",),
}
POST_FIELDS = {
    "/jobs/action": ("id", "action", "when", "when_tz", "seconds"),
    "/jobs/bulk-cancel": ("state", "task", "due_to", "error"),
    "/recurring/action": ("id", "action"),
    "/recurring/edit": (
        "id",
        "cron",
        "every",
        "timezone",
        "misfire_policy",
        "misfire_grace",
        "misfire_cap",
    ),
}


def test_bad_input_everywhere_is_a_clear_4xx_never_a_500(
    make_app: Callable[..., Flask], client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="s-1")
    client.recurring.save("nightly", "t.r", "0 2 * * *")
    web = make_app().test_client()
    for (url, params), value in itertools.product(GET_PARAMS.items(), BAD_VALUES):
        for param in params:
            response = web.get(url, query_string={param: value})
            assert response.status_code < 500, (url, param, value)
            if response.status_code == 400:
                assert 'id="message"' in response.get_data(as_text=True)
    token = csrf_token(web)
    good = {
        "/jobs/action": {"id": "s-1", "action": "reschedule", "seconds": "60"},
        # a blank task is no filter: the due range keeps s-1 out whatever field is fuzzed
        "/jobs/bulk-cancel": {"task": "t.none", "due_from": "2099-01-01T00:00"},
        "/recurring/action": {"id": "nightly", "action": "pause"},
        "/recurring/edit": {"id": "nightly", "cron": "0 2 * * *"},
    }
    for (url, fields), value in itertools.product(POST_FIELDS.items(), BAD_VALUES):
        for field in fields:
            form = {**good[url], field: value, "confirm": "yes", "csrf_token": token}
            response = web.post(url, data=form)
            assert response.status_code < 500, (url, field, value, response.data[:300])
    job = client.get("s-1")
    assert job is not None and job.state is JobState.SCHEDULED


def test_the_audit_line_names_the_authenticated_user(
    make_app: Callable[..., Flask], client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="parallel_scheduler.dashboard.audit")
    client.schedule("t.a", countdown=600, job_id="who-1")
    web = make_app(auth=BasicAuth("alice", "pw-123456")).test_client()
    headers = _basic("alice", "pw-123456")
    web.get("/", headers=headers)
    with web.session_transaction() as session:
        token = session["csrf"]
    form = {"id": "who-1", "action": "cancel", "confirm": "yes", "csrf_token": token}
    assert web.post("/jobs/action", data=form, headers=headers).status_code == 303
    [line] = [r.getMessage() for r in caplog.records if r.name.endswith(".audit")]
    assert "who=alice@127.0.0.1 action=cancel ids=who-1" in line


def test_unreachable_storage_is_a_503_page_without_the_password() -> None:
    """Nothing listens on port 1: every page says the store is unavailable, quickly, and the
    password of its URL is not on the page."""
    url = "redis://:Hunter2-secret@127.0.0.1:1/0"
    with Client(storage_url=url, retry_for=0.3, connect_timeout=0.3) as down:
        web = create_app(down).test_client()
        for path in ("/", "/jobs", "/jobs/detail?id=x", "/recurring", "/errors"):
            page = web.get(path)
            body = page.get_data(as_text=True)
            assert page.status_code == 503 and "unavailable" in body, path
            assert "Hunter2-secret" not in body
