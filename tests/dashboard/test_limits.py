"""Rate limits on the dashboard's Pauses page ("Pauses and rate limits") and ``/api/v1/limits``,
on every adapter: the limits in force with their rate, burst, who set them (escaped) and since
when (in the viewer's zone); the limit form and the Remove buttons (CSRF and a ticked box, an
audit line, a message of what was done); the API's list, create (201 with the numbers) and
delete (404 when none is in force); read-only mode shows them without a form."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from tests.dashboard.conftest import csrf_token

AUDIT = "parallel_scheduler.dashboard.audit"
BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes


def _text(response: object) -> str:
    return html.unescape(response.get_data(as_text=True))  # type: ignore[attr-defined]


def test_the_limit_form_sets_a_limit_and_remove_ends_it(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    page = web.get("/pauses").get_data(as_text=True)
    assert "<h1>Pauses and rate limits</h1>" in page
    assert 'id="no-limits"' in page and 'id="limit-form"' in page
    token = csrf_token(web, "/pauses")
    form = {"kind": "queue", "name": "emails", "rate": "100/m", "burst": "5", "confirm": "yes"}
    # Refused without the CSRF token, or without the ticked box: nothing written
    assert web.post("/pauses/limit", data=form).status_code == 400
    assert web.post("/pauses/limit", data={**form, "csrf_token": "forged"}).status_code == 400
    unticked = {k: v for k, v in form.items() if k != "confirm"}
    refused = web.post("/pauses/limit", data={**unticked, "csrf_token": token})
    assert refused.status_code == 400 and "confirm" in _text(refused)
    assert 'value="100/m"' in refused.get_data(as_text=True)  # what was typed stays
    assert client.rate_limits() == []
    # When posted whole, the queue is limited, said in a message, and audited
    done = web.post("/pauses/limit", data={**form, "csrf_token": token})
    assert done.status_code == 303
    shown = _text(web.get(done.headers["Location"]))
    assert "limited queue 'emails' to 100/m (burst 5)" in shown
    (limit,) = client.rate_limits()
    assert (limit.name, limit.count, limit.period, limit.burst) == ("emails", 100, 60.0, 5)
    assert limit.set_by.startswith("anonymous@")
    row = re.search(
        r'<tr class="limit-row" data-kind="queue" data-name="emails">(.*?)</tr>', shown, re.S
    )
    assert row is not None, shown
    assert "100/m" in row.group(1) and ">5<" in row.group(1) and "anonymous@" in row.group(1)
    assert '<td class="col-time limit-free">now</td>' in row.group(1)  # the next may go now
    # and the Remove button ends it
    remove = {"kind": "queue", "name": "emails", "confirm": "yes", "csrf_token": token}
    no_token = {k: v for k, v in remove.items() if k != "csrf_token"}
    assert web.post("/pauses/unlimit", data=no_token).status_code == 400
    done = web.post("/pauses/unlimit", data=remove)
    assert done.status_code == 303
    assert "removed the rate limit of queue 'emails'" in _text(web.get(done.headers["Location"]))
    assert client.rate_limits() == []
    again = web.post("/pauses/unlimit", data=remove)
    assert "queue 'emails' had no rate limit" in _text(web.get(again.headers["Location"]))
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT]
    assert any("action=limit_queue ids=emails rate=100/m burst=5" in line for line in lines)
    assert any("action=unlimit_queue ids=emails removed=True" in line for line in lines)


def test_the_page_escapes_and_shows_each_limit_in_the_viewers_zone(
    web: FlaskClient, client: Client
) -> None:
    client.limit_task("report.<b>build</b>", "2/h", burst=3, by="ops <i>h1</i>")
    page = web.get("/pauses?tz=Asia/Tokyo").get_data(as_text=True)
    assert "<b>build" not in page and "<i>h1" not in page
    row = re.search(
        r'<tr class="limit-row" data-kind="task" data-name="[^"]+">(.*?)</tr>', page, re.S
    )
    assert row is not None, page
    assert "report.&lt;b&gt;build&lt;/b&gt;" in row.group(1) and "2/h" in row.group(1)
    assert "ops &lt;i&gt;h1&lt;/i&gt;" in row.group(1)
    assert re.search(
        r'<time class="when" datetime="[^"]+\+00:00" title="[^"]+\+09:00">', row.group(1)
    )


def test_read_only_shows_the_limits_but_no_form(
    make_app: Callable[..., Flask], client: Client
) -> None:
    client.limit_queue("emails", "10/s", by="ops")
    web = make_app(read_only=True).test_client()
    page = web.get("/pauses").get_data(as_text=True)
    assert "emails" in page and 'id="limit-form"' not in page and "unlimit-form" not in page
    refused = web.post(
        "/pauses/unlimit", data={"kind": "queue", "name": "emails", "confirm": "yes"}
    )
    assert refused.status_code == 403
    refused = web.post(
        "/pauses/limit", data={"kind": "queue", "name": "x", "rate": "1/s", "confirm": "yes"}
    )
    assert refused.status_code == 403
    assert [limit.name for limit in client.rate_limits()] == ["emails"]
    assert web.get("/api/v1/limits").get_json()["limits"][0]["rate"] == "10/s"


def test_the_api_lists_creates_and_deletes_limits(web: FlaskClient, client: Client) -> None:
    assert web.get("/api/v1/limits").get_json() == {"limits": []}
    body = {"kind": "queue", "name": "emails", "rate": "120/m", "burst": 4}
    made = web.post("/api/v1/limits", json=body, headers=BEARER)
    assert made.status_code == 201
    assert made.get_json() == {
        "kind": "queue",
        "name": "emails",
        "rate": "120/m",
        "count": 120,
        "period": 60.0,
        "per_second": 2.0,
        "burst": 4,
        "set_by": "anonymous@127.0.0.1",
    }
    (listed,) = web.get("/api/v1/limits").get_json()["limits"]
    assert listed == {**made.get_json(), "set_at": listed["set_at"], "free_at": None}
    assert listed["set_at"].endswith("+00:00")
    # the burst defaults to 1; a task name with a slash is named in the path
    made = web.post(
        "/api/v1/limits", json={"kind": "task", "name": "a/b", "rate": "1/s"}, headers=BEARER
    )
    assert made.status_code == 201 and made.get_json()["burst"] == 1
    gone = web.delete("/api/v1/limits/task/a%2Fb", headers=BEARER)
    assert gone.status_code == 200
    assert gone.get_json() == {"kind": "task", "name": "a/b", "removed": True}
    done = web.delete("/api/v1/limits/queue/emails", headers=BEARER)
    assert done.status_code == 200 and client.rate_limits() == []
    again = web.delete("/api/v1/limits/queue/emails", headers=BEARER)
    assert again.status_code == 404 and again.get_json()["error"]["code"] == "not_found"
    bad_kind = web.delete("/api/v1/limits/topic/emails", headers=BEARER)
    assert bad_kind.status_code == 400


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"kind": "queue", "name": "e", "rate": "ten/s"}, "not 'ten' (in 'ten/s')"),
        ({"kind": "queue", "name": "e", "rate": "1/s", "burst": "5"}, "burst must be a whole"),
        ({"kind": "queue", "name": "e", "rate": "1/s", "burst": None}, "burst must be a whole"),
        ({"kind": "queue", "name": "e", "rate": 5}, "a rate is text"),
        ({"kind": "queue", "name": "e"}, "a rate is text"),
        ({"kind": ["queue"], "name": "e", "rate": "1/s"}, "a rate limit names a 'queue'"),
        ({"kind": "queue", "name": "e", "rate": "1/s", "by": "x"}, "unknown field(s) 'by'"),
    ],
)
def test_the_api_refuses_a_bad_body_by_name(
    web: FlaskClient, client: Client, body: dict[str, object], words: str
) -> None:
    refused = web.post("/api/v1/limits", json=body, headers=BEARER)
    assert refused.status_code == 400 and words in refused.get_json()["error"]["message"]
    assert client.rate_limits() == []


def test_a_browser_session_needs_the_csrf_header_for_the_api(
    web: FlaskClient, client: Client
) -> None:
    body = {"kind": "task", "name": "mail.send", "rate": "10/s"}
    refused = web.post("/api/v1/limits", json=body)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "csrf"
    assert client.rate_limits() == []
    token = web.get("/api/v1/csrf-token").get_json()["csrf_token"]
    assert web.post("/api/v1/limits", json=body, headers={"X-CSRF-Token": token}).status_code == 201
    assert web.delete("/api/v1/limits/task/mail.send").status_code == 403
    assert len(client.rate_limits()) == 1
