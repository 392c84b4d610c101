"""The HTTP API's security: the dashboard's auth (401, JSON), read-only mode (403 on every state
change), the CSRF rule (a state change not made with a bearer token needs the session's token in
``X-CSRF-Token``), the dashboard's response headers, and bad input or storage outages that are a
JSON 4xx/503, never a 500. Two tests drive the real ``parallel-scheduler dashboard`` server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from parallel_scheduler import Client
from parallel_scheduler.dashboard import BasicAuth, TokenAuth, create_app
from storage_adapters import JobState

TOKEN = "api-token-123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
#: Every state change of the API, with a body it accepts.
CHANGES: tuple[tuple[str, str, Any], ...] = (
    ("POST", "/api/v1/jobs", {"task": "t.new", "countdown": 60, "unique_key": "k-1"}),
    ("POST", "/api/v1/jobs/s-1/reschedule", {"countdown": 60}),
    ("POST", "/api/v1/jobs/s-1/run-now", None),
    ("POST", "/api/v1/jobs/s-1/cancel", None),
    ("POST", "/api/v1/recurring", {"id": "other", "task": "t.r", "every": 60}),
    ("PUT", "/api/v1/recurring/nightly", {"task": "t.r", "every": 60}),
    ("POST", "/api/v1/recurring/nightly/pause", None),
    ("POST", "/api/v1/recurring/nightly/resume", None),
    ("POST", "/api/v1/recurring/nightly/trigger", None),
    ("POST", "/api/v1/pauses", {"kind": "queue", "name": "emails", "note": "n"}),
    ("DELETE", "/api/v1/pauses/task/t.held", None),
    ("POST", "/api/v1/limits", {"kind": "queue", "name": "emails", "rate": "10/s", "burst": 2}),
    ("DELETE", "/api/v1/limits/task/t.limited", None),
    ("DELETE", "/api/v1/recurring/nightly", None),
)
READS = ("/api/v1/jobs", "/api/v1/jobs/s-1", "/api/v1/recurring", "/api/v1/recurring/nightly",
         "/api/v1/status", "/api/v1/pauses", "/api/v1/limits",
         "/api/v1/openapi.json")  # fmt: skip


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def seeded(client: Client) -> Client:
    client.schedule("t.a", countdown=600, job_id="s-1")
    client.recurring.save("nightly", "t.r", "0 2 * * *")
    client.pause_task("t.held")
    client.limit_task("t.limited", "5/m")
    return client


def _unchanged(client: Client) -> None:
    job = client.get("s-1")
    nightly = client.recurring.get("nightly")
    assert job is not None and job.state is JobState.SCHEDULED
    assert sum(client.storage.count_by_state().values()) == 1  # POST /jobs wrote nothing
    assert nightly is not None and nightly.enabled and nightly.schedule.cron == "0 2 * * *"
    assert client.recurring.get("other") is None
    assert [(p.kind.value, p.name) for p in client.pauses()] == [("task", "t.held")]
    assert [(lim.kind.value, lim.name) for lim in client.rate_limits()] == [("task", "t.limited")]


def _error_code(response: Any) -> str:
    assert response.mimetype == "application/json", response.data[:200]
    return str(response.get_json()["error"]["code"])


def test_auth_is_required_on_every_route_and_refused_in_json(
    make_app: Callable[..., Flask], seeded: Client
) -> None:
    web = make_app(auth=TokenAuth(TOKEN)).test_client()
    for url in (*READS, "/api/v1/nowhere"):
        refused = web.get(url)
        assert refused.status_code == 401 and _error_code(refused) == "unauthorized", url
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert web.get(url, headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    for method, url, body in CHANGES:
        assert web.open(url, method=method, json=body).status_code == 401, url
    _unchanged(seeded)
    basic = make_app(auth=BasicAuth("ops", "pa:ss")).test_client()
    assert basic.get("/api/v1/jobs").headers["WWW-Authenticate"].startswith("Basic")
    assert basic.get("/api/v1/jobs", headers=_basic("ops", "pa:ss")).status_code == 200
    assert basic.get("/api/v1/jobs", headers=BEARER).status_code == 401


def test_read_only_refuses_every_state_change(
    make_app: Callable[..., Flask], seeded: Client
) -> None:
    web = make_app(read_only=True, auth=TokenAuth(TOKEN)).test_client()
    for url in READS:
        assert web.get(url, headers=BEARER).status_code == 200, url
    for method, url, body in CHANGES:
        refused = web.open(url, method=method, json=body, headers=BEARER)
        assert refused.status_code == 403 and _error_code(refused) == "read_only", url
    _unchanged(seeded)


def test_a_bearer_token_needs_no_csrf_token(make_app: Callable[..., Flask], seeded: Client) -> None:
    web = make_app(auth=TokenAuth(TOKEN)).test_client()
    for method, url, body in CHANGES:
        response = web.open(url, method=method, json=body, headers=BEARER)
        assert response.status_code in (200, 201), (url, response.get_json())


@pytest.mark.parametrize(
    "auth", [BasicAuth("ops", "pa:ss"), TokenAuth(TOKEN), None], ids=["basic", "token", "none"]
)
def test_a_browser_session_needs_the_csrf_token(
    make_app: Callable[..., Flask], seeded: Client, auth: BasicAuth | TokenAuth | None
) -> None:
    """Basic auth (the token as its password, too) and no auth are what a browser sends on its
    own: every state change must carry the session's token in X-CSRF-Token."""
    web = make_app(auth=auth).test_client()
    headers = _basic("ops", "pa:ss") if isinstance(auth, BasicAuth) else _basic("me", TOKEN)
    for method, url, body in CHANGES:
        refused = web.open(url, method=method, json=body, headers=headers)
        assert refused.status_code == 403 and _error_code(refused) == "csrf", url
        wrong = {**headers, "X-CSRF-Token": "not-the-token"}
        assert web.open(url, method=method, json=body, headers=wrong).status_code == 403
    _unchanged(seeded)
    answer = web.get("/api/v1/csrf-token", headers=headers).get_json()
    assert answer["header"] == "X-CSRF-Token"
    with_token = {**headers, "X-CSRF-Token": answer["csrf_token"]}
    for method, url, body in CHANGES:
        response = web.open(url, method=method, json=body, headers=with_token)
        assert response.status_code in (200, 201), (url, response.get_json())
    other_browser = make_app(auth=auth).test_client()  # another session: the token is not its own
    refused = other_browser.post("/api/v1/jobs/s-1/run-now", headers=with_token)
    assert refused.status_code == 403


def test_answers_carry_the_dashboards_security_headers(
    make_app: Callable[..., Flask], seeded: Client
) -> None:
    web = make_app(auth=TokenAuth(TOKEN)).test_client()
    for response in (
        web.get("/api/v1/jobs", headers=BEARER),
        web.get("/api/v1/jobs?state=bogus", headers=BEARER),
        web.get("/api/v1/jobs"),
        web.get("/api/v1/nowhere", headers=BEARER),
        web.post("/api/v1/jobs/s-1/cancel", headers=BEARER),
    ):
        assert response.mimetype == "application/json"
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Cache-Control"] == "no-store"
    assert web.get("/api/v1/jobs", headers=BEARER).headers.get("Set-Cookie") is None


BAD_BODIES = (
    b"not json",
    b"[1, 2]",
    b'"text"',
    b"NaN",
    b'{"countdown": NaN}',
    b'{"countdown": Infinity}',
    b'{"countdown": 1e999}',
    b'{"countdown": ' + b"9" * 5000 + b"}",
    b"[" * 100_000 + b"]" * 100_000,
    b"\xff\xfe\x00garbage",
    b'{"countdown": 1, "countdown": "x"}',
)


def test_no_body_or_id_a_client_sends_is_a_500(
    make_app: Callable[..., Flask], seeded: Client
) -> None:
    web = make_app(auth=TokenAuth(TOKEN)).test_client()
    for raw in BAD_BODIES:
        for url in ("/api/v1/jobs/s-1/reschedule", "/api/v1/recurring"):
            response = web.post(url, data=raw, headers=BEARER, content_type="application/json")
            assert response.status_code == 400 and _error_code(response) == "bad_request", raw[:40]
    too_big = web.post(
        "/api/v1/recurring",
        data=b"x" * (2 * 1024 * 1024),
        headers=BEARER,
        content_type="text/plain",
    )
    assert too_big.status_code == 413 and _error_code(too_big) == "too_large"
    for job_id in ("%00", "a%0Ab", "%E2%80%AE", "x" * 1500, "%20", "a%20b", "%C0%80"):
        for url in (f"/api/v1/jobs/{job_id}", f"/api/v1/recurring/{job_id}"):
            response = web.get(url, headers=BEARER)
            assert response.status_code in (400, 404), (url, response.status_code)
            assert response.mimetype == "application/json"
    _unchanged(seeded)


def test_unreachable_storage_is_a_503_without_the_password() -> None:
    url = "redis://:Hunter2-secret@127.0.0.1:1/0"
    with Client(storage_url=url, retry_for=0.3, connect_timeout=0.3) as down:
        web = create_app(down).test_client()
        for method, path, body in (
            ("GET", "/api/v1/jobs", None),
            ("GET", "/api/v1/jobs/x", None),
            ("GET", "/api/v1/recurring", None),
            ("GET", "/api/v1/status", None),
            ("POST", "/api/v1/jobs/x/cancel", None),
        ):
            response = web.open(path, method=method, json=body, headers=BEARER)
            assert response.status_code == 503, path
            assert _error_code(response) == "storage_unavailable"
            assert "Hunter2-secret" not in response.get_data(as_text=True)


# -- the real server: ``parallel-scheduler dashboard`` (waitress) ---------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with Client(storage_url=url) as client:
        client.setup()
        client.schedule("t.a", countdown=600, job_id="web-1")
    command = [sys.executable, "-m", "parallel_scheduler", "--storage-url", url, "dashboard"]
    process = subprocess.Popen(
        [*command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PARALLEL_SCHEDULER_DASHBOARD_TOKEN": TOKEN},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), (line, process.stderr)
        yield line.split()[1].rstrip("/")
    finally:
        process.terminate()
        process.wait(timeout=20)


def _request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, Any], Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


@pytest.mark.timeout(60)
def test_the_real_server_serves_the_api_to_a_script_with_a_token(served: str) -> None:
    status, headers, page = _request(f"{served}/api/v1/jobs", headers=BEARER)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [job["id"] for job in page["jobs"]] == ["web-1"]
    assert headers["X-Frame-Options"] == "DENY"
    status, _, document = _request(f"{served}/api/v1/openapi.json", headers=BEARER)
    assert status == 200 and document["openapi"] == "3.1.0"
    status, _, moved = _request(
        f"{served}/api/v1/jobs/web-1/reschedule", "POST", BEARER, {"countdown": 30}
    )
    assert status == 200 and moved["rescheduled"] is True
    status, _, done = _request(f"{served}/api/v1/jobs/web-1/cancel", "POST", BEARER)
    assert status == 200 and done == {"id": "web-1", "cancelled": True}
    status, _, again = _request(f"{served}/api/v1/jobs/web-1/cancel", "POST", BEARER)
    assert status == 409 and again["error"]["code"] == "conflict"


@pytest.mark.timeout(60)
def test_the_real_server_refuses_in_json(served: str) -> None:
    status, headers, refused = _request(f"{served}/api/v1/status")
    assert status == 401 and refused["error"]["code"] == "unauthorized", headers
    assert {k.lower(): v for k, v in headers.items()}["www-authenticate"].startswith("Bearer")
    as_browser = {"Authorization": "Basic " + base64.b64encode(f"me:{TOKEN}".encode()).decode()}
    status, _, refused = _request(f"{served}/api/v1/jobs/web-1/cancel", "POST", as_browser)
    assert status == 403 and refused["error"]["code"] == "csrf"
    status, _, refused = _request(f"{served}/api/v1/jobs/web-1/reschedule", "POST", BEARER, [1])
    assert status == 400 and "JSON object" in refused["error"]["message"]
