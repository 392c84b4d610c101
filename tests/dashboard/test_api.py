"""The HTTP API (``/api/v1/``) through Flask's test client on every storage adapter: the job list
with the Jobs page's filters and keyset paging, the job and recurring job actions with their
404/409 answers, status, and the same JSON shapes as the command line's ``--json``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.process.status_report import status_report
from storage_adapters import JobState, OutcomeEvent, OutcomeState, OutcomeStore

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes


def _call(web: FlaskClient, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    response = web.open(url, method=method, headers=BEARER, json=body)
    assert response.mimetype == "application/json", (url, response.data[:200])
    return response.status_code, response.get_json()


def _error(web: FlaskClient, method: str, url: str, status: int, body: Any = None) -> str:
    code, answer = _call(web, method, url, body)
    assert code == status, (url, answer)
    assert set(answer) == {"error"} and set(answer["error"]) == {"code", "message"}
    return str(answer["error"]["message"])


@pytest.fixture
def web(make_app: Callable[..., Flask]) -> FlaskClient:
    return make_app().test_client()


def test_list_pages_through_every_job_in_due_order(web: FlaskClient, client: Client) -> None:
    for n in range(7):
        client.schedule("t.even" if n % 2 == 0 else "t.odd", countdown=100 + n, job_id=f"j-{n}")
    seen: list[str] = []
    url = "/api/v1/jobs?limit=3"
    pages = 0
    while url:
        code, page = _call(web, "GET", url)
        assert code == 200 and len(page["jobs"]) <= 3
        seen += [job["id"] for job in page["jobs"]]
        pages += 1
        url = page["next"] and f"/api/v1/jobs?limit=3&after={page['next']}"
    assert seen == [f"j-{n}" for n in range(7)] and pages == 3
    _, odd = _call(web, "GET", "/api/v1/jobs?task=t.odd")
    assert [job["id"] for job in odd["jobs"]] == ["j-1", "j-3", "j-5"]
    client.cancel("j-0")
    _, cancelled = _call(web, "GET", "/api/v1/jobs?state=cancelled")
    assert [job["id"] for job in cancelled["jobs"]] == ["j-0"]
    due = client.get("j-2")
    assert due is not None
    start = (due.due_at - timedelta(seconds=0.5)).isoformat()
    end = (due.due_at + timedelta(seconds=1.5)).isoformat()
    code, ranged = _call(
        web, "GET", f"/api/v1/jobs?due_from={start}&due_to={end}".replace("+", "%2B")
    )
    assert code == 200 and [job["id"] for job in ranged["jobs"]] == ["j-2", "j-3"]


@pytest.mark.parametrize(
    "query",
    ["state=bogus", "limit=0", "limit=501", "limit=x", "after=nonsense", "after=nan:x",
     "due_from=2030-13-45", "due_from=2031-01-01&due_to=2030-01-01", "task=" + "x" * 600],
)  # fmt: skip
def test_bad_list_parameters_are_a_400_naming_them(web: FlaskClient, query: str) -> None:
    message = _error(web, "GET", f"/api/v1/jobs?{query}", 400)
    assert query.split("=")[0].split("&")[0] in message


def test_one_job_and_the_job_actions(web: FlaskClient, client: Client) -> None:
    client.schedule("t.a", [1], countdown=600, job_id="a-1")
    code, job = _call(web, "GET", "/api/v1/jobs/a-1")
    assert code == 200 and job["id"] == "a-1" and job["args"] == [1] and job["state"] == "scheduled"
    assert "no job" in _error(web, "GET", "/api/v1/jobs/missing", 404)
    _error(web, "GET", "/api/v1/jobs/has%20space", 400)
    _error(web, "GET", "/api/v1/jobs/" + "x" * 300, 400)

    code, moved = _call(web, "POST", "/api/v1/jobs/a-1/reschedule", {"countdown": 5})
    assert code == 200 and moved["id"] == "a-1" and moved["rescheduled"] is True
    eta = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
    code, moved = _call(web, "POST", "/api/v1/jobs/a-1/reschedule", {"eta": eta.isoformat()})
    assert code == 200 and moved["due_at"] == eta.isoformat()
    code, moved = _call(web, "POST", "/api/v1/jobs/a-1/reschedule", {"eta": "2031-05-06T07:08:09"})
    assert moved["due_at"] == eta.isoformat()  # no offset: UTC
    for body in ({}, {"eta": eta.isoformat(), "countdown": 1}, {"countdown": "5"},
                 {"countdown": True}, {"countdown": -1}, {"countdown": 1e300},
                 {"eta": "0001-01-01T00:00:00"}, {"when": 5}, [1], "x"):  # fmt: skip
        _error(web, "POST", "/api/v1/jobs/a-1/reschedule", 400, body)
    before = datetime.now(timezone.utc)
    code, now = _call(web, "POST", "/api/v1/jobs/a-1/run-now")
    assert code == 200 and datetime.fromisoformat(now["due_at"]) >= before - timedelta(seconds=5)

    assert _call(web, "POST", "/api/v1/jobs/a-1/cancel") == (200, {"id": "a-1", "cancelled": True})
    message = _error(web, "POST", "/api/v1/jobs/a-1/cancel", 409)
    assert "cancelled" in message and "scheduled" in message
    _error(web, "POST", "/api/v1/jobs/a-1/reschedule", 409, {"countdown": 5})
    _error(web, "POST", "/api/v1/jobs/a-1/run-now", 409)
    for action in ("cancel", "run-now"):
        _error(web, "POST", f"/api/v1/jobs/missing/{action}", 404)
    _error(web, "POST", "/api/v1/jobs/missing/reschedule", 404, {"countdown": 1})
    _error(web, "DELETE", "/api/v1/jobs/a-1", 405)
    _error(web, "GET", "/api/v1/no-such-thing", 404)


def test_recurring_jobs_from_create_to_remove(web: FlaskClient, client: Client) -> None:
    body = {"id": "nightly", "task": "t.r", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
            "args": ["eu"], "options": {"queue": "reports"}, "jitter": 45}  # fmt: skip
    code, made = _call(web, "POST", "/api/v1/recurring", body)
    assert code == 201 and made["cron"] == "30 2 * * *" and made["options"] == {"queue": "reports"}
    assert made["timezone"] == "Europe/Berlin" and made["enabled"] is True
    assert made["jitter"] == 45
    assert "exists already" in _error(web, "POST", "/api/v1/recurring", 409, body)
    for bad, field in (
        ({**body, "id": "other", "cron": "not a cron"}, "cron"),
        ({**body, "id": "other", "timezone": "Mars/Base"}, "Mars/Base"),
        ({**body, "id": "a@b"}, "@"),
        ({**body, "id": "other", "colour": "red"}, "colour"),
        ({**body, "id": "other", "options": {"task": "x"}}, "task"),
        ({**body, "id": "other", "misfire_cap": "many"}, "misfire_cap"),
        ({**body, "id": "other", "misfire_policy": "often"}, "misfire_policy"),
        ({**body, "id": "other", "jitter": -1}, "jitter must be from 0"),
        ({**body, "id": "other", "jitter": "soon"}, "jitter"),
        ({"id": "other", "cron": "* * * * *"}, "task"),
    ):
        assert field in _error(web, "POST", "/api/v1/recurring", 400, bad), bad
    code, got = _call(web, "GET", "/api/v1/recurring/nightly")
    assert code == 200 and got == made

    code, updated = _call(web, "PUT", "/api/v1/recurring/nightly", {"task": "t.r2", "every": 90})
    assert code == 200 and updated["every"] == 90 and updated["cron"] is None
    assert updated["task"] == "t.r2" and updated["timezone"] == "UTC"  # a replace: defaults
    _error(web, "PUT", "/api/v1/recurring/missing", 404, {"task": "t", "every": 60})

    code, paused = _call(web, "POST", "/api/v1/recurring/nightly/pause")
    assert code == 200 and paused["enabled"] is False
    code, resumed = _call(web, "POST", "/api/v1/recurring/nightly/resume")
    assert code == 200 and resumed["enabled"] is True
    code, fired = _call(web, "POST", "/api/v1/recurring/nightly/trigger")
    assert code == 200 and fired["job_id"].startswith("nightly@trigger-")
    assert client.get(fired["job_id"]) is not None
    for action in ("pause", "resume", "trigger"):
        _error(web, "POST", f"/api/v1/recurring/missing/{action}", 404)

    for n in range(3):
        client.recurring.save(f"r-{n}", "t.x", every=60)
    code, first = _call(web, "GET", "/api/v1/recurring?limit=2")
    assert [r["id"] for r in first["recurring"]] == ["nightly", "r-0"] and first["next_offset"] == 2
    code, rest = _call(web, "GET", "/api/v1/recurring?limit=2&offset=2")
    assert [r["id"] for r in rest["recurring"]] == ["r-1", "r-2"] and rest["next_offset"] is None

    assert _call(web, "DELETE", "/api/v1/recurring/nightly") == (
        200,
        {"id": "nightly", "removed": True},
    )
    _error(web, "DELETE", "/api/v1/recurring/nightly", 404)
    _error(web, "GET", "/api/v1/recurring/nightly", 404)


def test_status_is_the_report_with_its_health(web: FlaskClient, client: Client) -> None:
    client.schedule("t.a", eta=time.time() - 30, job_id="late-1")
    code, status = _call(web, "GET", "/api/v1/status")
    assert code == 200
    assert set(status) == {*status_report(client), "problems"}
    assert status["counts"][JobState.SCHEDULED.value] == 1
    assert 25 <= status["lag_seconds"] < 120
    assert {"kind": "no_live_scheduler"}.items() <= status["problems"][0].items()


def test_the_api_answers_with_the_command_lines_json_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'same.db'}"
    store = ["--storage-url", url]
    with Client(storage_url=url, retry_for=1.0) as client:
        client.setup()
        client.schedule("t.a", [1], {"k": "v"}, countdown=600, job_id="s-1", queue="q")
        client.schedule("t.a", countdown=600, job_id="s-2")
        client.recurring.save("every-min", "t.r", every=60, args=[2])
        from parallel_scheduler.dashboard import create_app

        web = create_app(client).test_client()

        def cli(*args: str) -> Any:
            assert main([*store, *args]) in (0, 1)
            return json.loads(capsys.readouterr().out)

        assert cli("show", "s-1", "--json") == _call(web, "GET", "/api/v1/jobs/s-1")[1]
        listed = _call(web, "GET", "/api/v1/jobs")[1]["jobs"]
        assert cli("list", "--json") == listed
        assert (
            cli("recurring", "list", "--json")
            == _call(web, "GET", "/api/v1/recurring")[1]["recurring"]
        )
        assert cli("status", "--json").keys() == _call(web, "GET", "/api/v1/status")[1].keys()
        api_moved = _call(web, "POST", "/api/v1/jobs/s-1/reschedule", {"countdown": 900})[1]
        cli_moved = cli("reschedule", "s-2", "--countdown", "900", "--json")
        assert api_moved.keys() == cli_moved.keys()
        assert cli("cancel", "s-1", "--json") == [{"id": "s-1", "cancelled": True}]
        assert _call(web, "POST", "/api/v1/jobs/s-2/cancel")[1] == {"id": "s-2", "cancelled": True}


def test_outcomes_and_a_jobs_timeline(web: FlaskClient, client: Client) -> None:
    store = client.storage
    if not isinstance(store, OutcomeStore):
        pytest.skip("this store keeps no outcomes")
    client.schedule("t.a", countdown=600, job_id="o-1")
    now = time.time()
    store.record_outcomes(
        [
            OutcomeEvent("o-1", "t.a", OutcomeState.RECEIVED, now + 1, worker="w1"),
            OutcomeEvent("o-1", "t.a", OutcomeState.STARTED, now + 2, worker="w1"),
            OutcomeEvent(
                "o-1", "t.a", OutcomeState.FAILED, now + 3, worker="w1", runtime=0.5, error="E: x"
            ),
            OutcomeEvent("o-2", "t.b", OutcomeState.SUCCEEDED, now + 4, worker="w2", runtime=0.1),
        ]
    )
    code, first = _call(web, "GET", "/api/v1/outcomes?limit=1")
    assert code == 200 and first["recorded"] is True
    assert [(o["job_id"], o["state"]) for o in first["outcomes"]] == [("o-2", "succeeded")]
    code, second = _call(web, "GET", f"/api/v1/outcomes?limit=1&before={first['next']}")
    assert [(o["job_id"], o["state"], o["error"]) for o in second["outcomes"]] == [
        ("o-1", "failed", "E: x")
    ]
    code, failed = _call(web, "GET", "/api/v1/outcomes?state=failed&task=t.a")
    assert [o["job_id"] for o in failed["outcomes"]] == ["o-1"] and failed["next"] is None
    _error(web, "GET", "/api/v1/outcomes?state=started", 400)
    _error(web, "GET", "/api/v1/outcomes?before=nonsense", 400)
    code, counts = _call(web, "GET", "/api/v1/outcomes/counts")
    assert counts["counts"]["t.a"]["failed"] == 1 and counts["counts"]["t.b"]["succeeded"] == 1
    code, job = _call(web, "GET", "/api/v1/jobs/o-1")
    assert [entry["state"] for entry in job["timeline"]] == [
        "created",
        "received",
        "started",
        "failed",
    ]


def test_mounted_under_a_path_the_document_says_where(client: Client) -> None:
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from parallel_scheduler.dashboard import create_app

    app = create_app(client)
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/scheduler": app.wsgi_app})  # type: ignore[method-assign]
    web = app.test_client()
    document = web.get("/scheduler/api/v1/openapi.json").get_json()
    assert document["servers"] == [{"url": "/scheduler/api/v1"}]
    assert web.get("/scheduler/api/v1/jobs").get_json()["jobs"] == []
