"""The recurring jobs' operations console on every storage adapter (SQLite, PostgreSQL, Redis):
the edit page changes a job's arguments, keyword arguments and queue and keeps every field left as
it is; the HTTP API's ``PATCH`` does the same with only the fields it names; bad JSON in either
is a 400 naming the field with the stored row unchanged; and the Recurring page, the API and the
command line show each job's last outcome, read in one storage call for a page of jobs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timezone
from html.parser import HTMLParser
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from storage_adapters import OutcomeEvent, OutcomeState, OutcomeStore, RecurringRecord
from tests.dashboard.conftest import csrf_token

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes
START = datetime(2030, 1, 1, tzinfo=timezone.utc)
#: Past the nesting ``Client`` allows (32), and past what Python's JSON parser can read at all.
TOO_DEEP = "[" * 40 + "]" * 40
UNREADABLE_DEPTH = "[" * 5000 + "]" * 5000


class _FormFields(HTMLParser):
    """The fields a browser would submit from one form of a page: inputs, text areas and the
    selected option of each select, by name."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.inside = named.get("id") == self.form_id
        if not self.inside:
            return
        if tag == "input" and named.get("type") != "checkbox" and "name" in named:
            self.fields[named["name"]] = named.get("value", "")
        elif tag == "textarea":
            self._textarea = named["name"]
            self.fields[self._textarea] = ""
        elif tag == "select":
            self._select = named["name"]
        elif tag == "option" and self._select is not None and "selected" in named:
            self.fields[self._select] = named["value"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data


def edit_form(web: FlaskClient, recurring_id: str) -> dict[str, str]:
    """The edit page's form as a browser would submit it untouched, confirmed."""
    page = web.get(f"/recurring/edit?id={recurring_id}")
    assert page.status_code == 200, page.data[:300]
    parser = _FormFields("recurring-edit-form")
    parser.feed(page.get_data(as_text=True))
    return {**parser.fields, "confirm": "yes"}


def stored(client: Client, recurring_id: str) -> RecurringRecord:
    record = client.storage.get_recurring(recurring_id)
    assert record is not None
    return record


def save_nightly(client: Client, **changes: Any) -> None:
    options: dict[str, Any] = {
        "args": ["eu", 1],
        "kwargs": {"format": "csv", "html": "<b>&</b>"},
        "timezone": "Europe/Paris",
        "start": START,
        "misfire_policy": "skip",
        "misfire_cap": 7,
        "misfire_grace": 120.0,
        "jitter": 90.0,
        "catch_up_window": 7200.0,
        "queue": "reports",
        "priority": 5,
        **changes,
    }
    client.recurring.save("nightly", "reports.build", "30 2 * * *", **options)


def _api(web: FlaskClient, method: str, url: str, body: Any = None, **extra: Any) -> Any:
    response = web.open(url, method=method, headers=BEARER, json=body, **extra)
    assert response.mimetype == "application/json", (url, response.data[:200])
    return response


# The edit page ----------------------------------------------------------------------------------


def test_the_edit_page_changes_args_kwargs_and_queue_and_keeps_the_rest(
    web: FlaskClient, client: Client
) -> None:
    save_nightly(client)
    client.recurring.pause("nightly")
    before = client.recurring.get("nightly")
    assert before is not None
    form = edit_form(web, "nightly")
    assert json.loads(form["args"]) == ["eu", 1]
    assert json.loads(form["kwargs"]) == {"format": "csv", "html": "<b>&</b>"}
    assert form["queue"] == "reports"
    # Submitted untouched: saved, nothing changed (the schedule, the call, the options, paused).
    assert web.post("/recurring/edit", data=form).status_code == 303
    same = client.recurring.get("nightly")
    assert same is not None
    assert (same.task, same.args, same.kwargs, same.options) == (
        before.task,
        before.args,
        before.kwargs,
        before.options,
    )
    assert same.schedule == before.schedule and same.enabled is False
    # Arguments, keyword arguments and queue changed; everything else as it was.
    changed = {**form, "args": '[2, "us"]', "kwargs": '{"format": "pdf"}', "queue": "bulk"}
    done = web.post("/recurring/edit", data=changed, follow_redirects=True)
    assert done.status_code == 200
    assert "saved (args,kwargs,queue changed)" in done.get_data(as_text=True)
    after = client.recurring.get("nightly")
    assert after is not None
    assert (after.args, after.kwargs) == ([2, "us"], {"format": "pdf"})
    assert after.options == {"queue": "bulk", "priority": 5}
    assert after.task == "reports.build" and after.schedule == before.schedule
    assert after.schedule.start_at == START.timestamp() and after.enabled is False
    # A blank queue removes it; the other send options stay.
    assert web.post("/recurring/edit", data={**changed, "queue": ""}).status_code == 303
    cleared = client.recurring.get("nightly")
    assert cleared is not None and cleared.options == {"priority": 5}


def test_a_field_the_form_leaves_out_keeps_its_stored_value(
    web: FlaskClient, client: Client
) -> None:
    save_nightly(client)
    before = client.recurring.get("nightly")
    assert before is not None
    token = csrf_token(web, "/recurring/edit?id=nightly")
    only_args = {"id": "nightly", "confirm": "yes", "csrf_token": token, "args": "[3]"}
    assert web.post("/recurring/edit", data=only_args).status_code == 303
    after = client.recurring.get("nightly")
    assert after is not None and after.args == [3]
    assert after.kwargs == before.kwargs and after.options == before.options
    assert after.schedule == before.schedule  # cron, zone, policy, cap, grace, start


@pytest.mark.parametrize(
    ("field", "text", "reason"),
    [
        ("args", "[1,", "args is not JSON"),
        ("args", '{"a": 1}', "args must be a JSON array"),
        ("kwargs", "[1]", "kwargs must be a JSON object"),
        ("kwargs", '{"a": }', "kwargs is not JSON"),
        ("args", TOO_DEEP, "args nest deeper than 32"),
        ("args", UNREADABLE_DEPTH, "args is nested too deeply"),
        ("kwargs", '{"a": "\x01"}', "kwargs contains a control character"),
    ],
)
def test_bad_json_in_the_edit_form_names_the_field_and_writes_nothing(
    web: FlaskClient, client: Client, field: str, text: str, reason: str
) -> None:
    save_nightly(client)
    row = stored(client, "nightly")
    form = {**edit_form(web, "nightly"), "queue": "changed", field: text}
    refused = web.post("/recurring/edit", data=form)
    body = refused.get_data(as_text=True)
    assert refused.status_code == 400 and 'id="form-error"' in body
    error = re.search(r'<p id="form-error" class="error">([^<]*)</p>', body)
    assert error is not None and reason in error.group(1).replace("&#39;", "'"), body[:500]
    if len(text) < 100:  # what was typed is shown again, to correct it
        shown = _FormFields("recurring-edit-form")
        shown.feed(body)
        assert shown.fields[field] == text and shown.fields["queue"] == "changed"
    assert stored(client, "nightly") == row


def test_the_new_page_refuses_json_too_deep_to_read_by_name(
    web: FlaskClient, client: Client
) -> None:
    token = csrf_token(web, "/recurring/new")
    form = {"id": "deep", "task": "t.x", "cron": "0 2 * * *", "timezone": "UTC"}
    refused = web.post(
        "/recurring/new",
        data={**form, "kwargs": UNREADABLE_DEPTH, "confirm": "yes", "csrf_token": token},
    )
    assert refused.status_code == 400
    assert "kwargs is nested too deeply" in refused.get_data(as_text=True)
    assert client.recurring.get("deep") is None


# The HTTP API -----------------------------------------------------------------------------------


def test_patch_changes_only_the_fields_it_names(web: FlaskClient, client: Client) -> None:
    save_nightly(client)
    client.recurring.pause("nightly")
    before = client.recurring.get("nightly")
    assert before is not None
    response = _api(
        web,
        "PATCH",
        "/api/v1/recurring/nightly",
        {"args": [2], "kwargs": {"format": "pdf"}, "options": {"queue": "bulk"}},
    )
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert (answer["args"], answer["kwargs"]) == ([2], {"format": "pdf"})
    assert answer["options"] == {"queue": "bulk", "priority": 5}
    assert answer["enabled"] is False and answer["last_outcome"] is None
    after = client.recurring.get("nightly")
    assert after is not None and after.schedule == before.schedule
    assert after.task == before.task and after.enabled is False
    # An option set to null is removed; an interval replaces the cron, and a cron the interval.
    answer = _api(web, "PATCH", "/api/v1/recurring/nightly", {"options": {"queue": None}})
    assert answer.get_json()["options"] == {"priority": 5}
    answer = _api(web, "PATCH", "/api/v1/recurring/nightly", {"every": 600}).get_json()
    assert (answer["cron"], answer["every"], answer["timezone"]) == (None, 600, "Europe/Paris")
    answer = _api(web, "PATCH", "/api/v1/recurring/nightly", {"cron": "0 3 * * *"}).get_json()
    assert (answer["cron"], answer["every"]) == ("0 3 * * *", None)
    # start: null removes the bound; an empty body saves the job as it is.
    assert _api(web, "PATCH", "/api/v1/recurring/nightly", {"start": None}).status_code == 200
    unbounded = client.recurring.get("nightly")
    assert unbounded is not None and unbounded.schedule.start_at is None
    assert unbounded.schedule.misfire_cap == 7 and unbounded.schedule.misfire_grace == 120.0
    assert unbounded.schedule.jitter == 90.0 and unbounded.schedule.catch_up_window == 7200.0
    windowless = _api(web, "PATCH", "/api/v1/recurring/nightly", {"catch_up_window": None})
    assert windowless.get_json()["catch_up_window"] is None
    assert _api(web, "PATCH", "/api/v1/recurring/nightly").status_code == 200
    assert _api(web, "PATCH", "/api/v1/recurring/missing", {"args": []}).status_code == 404


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"args": "[1,"}, "args must be a list"),
        ({"kwargs": [1]}, "kwargs must be an object"),
        ({"args": None}, "args: null is not a value"),
        ({"args": json.loads(TOO_DEEP)}, "args nest deeper than 32"),
        ({"kwargs": {"a": json.loads(TOO_DEEP)}}, "kwargs nest deeper than 32"),
        ({"args": [1], "colour": "red"}, "colour"),
        ({"options": {"task": "x"}}, "task"),
        ({"options": {"priority": "high"}}, "priority"),
        ({"cron": "61 * * * *", "args": [1]}, "61 * * * *"),
        ({"cron": "0 2 * * *", "every": 60}, "cron"),
        ({"timezone": "Mars/Base"}, "Mars/Base"),
        ({"misfire_policy": "often"}, "misfire_policy"),
        ({"task": ""}, "task"),
        ('{"args": [1,', "the body is not JSON"),
        ('{"args": ' + UNREADABLE_DEPTH + "}", "the body is not JSON"),
    ],
)
def test_a_bad_patch_or_put_is_a_400_naming_the_field_and_writes_nothing(
    web: FlaskClient, client: Client, body: Any, reason: str
) -> None:
    save_nightly(client)
    row = stored(client, "nightly")
    for method in ("PATCH", "PUT"):
        if isinstance(body, str):
            response = web.open(
                "/api/v1/recurring/nightly",
                method=method,
                headers=BEARER,
                data=body,
                content_type="application/json",
            )
        elif method == "PUT":  # a replace names its task and schedule: only the bad part differs
            whole = {"task": "reports.build", "cron": "30 2 * * *", **body}
            response = _api(web, method, "/api/v1/recurring/nightly", whole)
        else:
            response = _api(web, method, "/api/v1/recurring/nightly", body)
        if method == "PUT" and body == {"args": None}:
            continue  # PUT reads a null as "left out": the default, a valid replace
        answer = response.get_json()
        assert response.status_code == 400, (method, body, answer)
        assert reason in answer["error"]["message"], (method, answer)
        assert stored(client, "nightly") == row, method


def test_patch_refuses_a_row_it_cannot_read_whole_and_obeys_the_guard(
    make_app: Callable[..., Flask], client: Client
) -> None:
    save_nightly(client)
    row = stored(client, "nightly")
    read_only = make_app(read_only=True).test_client()
    refused = _api(read_only, "PATCH", "/api/v1/recurring/nightly", {"args": [9]})
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "read_only"
    web = make_app().test_client()
    no_token = web.open("/api/v1/recurring/nightly", method="PATCH", json={"args": [9]})
    assert no_token.status_code == 403 and no_token.get_json()["error"]["code"] == "csrf"
    assert stored(client, "nightly") == row
    # A row whose payload no longer decodes: no field of it can be kept, so PATCH says so.
    client.recurring.save("broken", "t.x", every=60)
    broken = stored(client, "broken")
    _overwrite_payload(client, broken, "not json")
    conflict = _api(web, "PATCH", "/api/v1/recurring/broken", {"args": [1]})
    assert conflict.status_code == 409 and "PUT" in conflict.get_json()["error"]["message"]


def _overwrite_payload(client: Client, record: RecurringRecord, payload: str) -> None:
    """The stored row with an undecodable payload, written as an older version might have."""
    from storage_adapters import NewRecurring

    client.storage.save_recurring(
        NewRecurring(
            id=record.id,
            task=record.task,
            payload=payload,
            schedule=record.schedule,
            enabled=record.enabled,
            next_run_at=record.next_run_at,
        ),
        "update",
    )
    again = client.recurring.get(record.id)
    assert again is not None and again.problem is not None


# The last outcome -------------------------------------------------------------------------------


def _fired(client: Client) -> dict[str, list[str]]:
    """Recurring jobs with firings and outcomes recorded as the workers' plugin would:
    ``failing`` (its newest firing failed), ``pending`` (an older firing succeeded, the newest
    has no outcome yet), ``retrying`` (retried), ``never`` (no firing)."""
    store = client.storage
    assert isinstance(store, OutcomeStore)
    for name in ("failing", "pending", "retrying", "never"):
        client.recurring.save(name, f"t.{name}", every=3600)
    fired = {
        "failing": [client.recurring.trigger("failing")],
        "pending": [client.recurring.trigger("pending"), client.recurring.trigger("pending")],
        "retrying": [client.recurring.trigger("retrying")],
    }
    now = store.now()
    store.record_outcomes(
        [
            OutcomeEvent(fired["failing"][0], "t.failing", OutcomeState.RECEIVED, now, "w1"),
            OutcomeEvent(
                fired["failing"][0], "t.failing", OutcomeState.FAILED, now + 1, "w1", 0.5, "E: x"
            ),
            OutcomeEvent(fired["pending"][0], "t.pending", OutcomeState.SUCCEEDED, now, "w2"),
            OutcomeEvent(fired["retrying"][0], "t.retrying", OutcomeState.RETRIED, now, "w2"),
        ]
    )
    return fired


def _needs_outcomes(client: Client) -> None:
    if not isinstance(client.storage, OutcomeStore):
        pytest.fail("every adapter keeps outcomes")


def test_the_recurring_page_shows_the_last_outcome_as_a_badge(
    web: FlaskClient, client: Client
) -> None:
    _needs_outcomes(client)
    fired = _fired(client)
    body = web.get("/recurring").get_data(as_text=True)
    header = re.search(r'<th class="col-last-outcome" title="([^"]+)">Outcome</th>', body)
    assert header is not None and header.group(1).startswith("the last outcome")

    def cell(recurring_id: str) -> str:
        row = re.search(rf'data-recurring-id="{recurring_id}">(.*?)</tr>', body, flags=re.DOTALL)
        assert row is not None, recurring_id
        found = re.search(r'<td class="recurring-last-outcome"[^>]*>(.*?)</td>', row.group(1))
        assert found is not None
        return found.group(1)

    failing = cell("failing")
    assert 'class="badge state-badge badge-failed"' in failing and ">failed</a>" in failing
    assert f'href="/jobs/detail?id={fired["failing"][0]}"' in failing
    assert "badge-retried" in cell("retrying")
    assert "badge" not in cell("pending") and ">-<" in cell("pending")  # newest: none yet
    assert 'title="never fired"' in cell("never")
    # The older firing's success is still shown beside it in the recent firings.
    assert 'firing-outcome outcome-succeeded">succeeded' in body


def test_a_page_of_jobs_reads_its_outcomes_in_one_call(
    web: FlaskClient, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_outcomes(client)
    store = client.storage
    assert isinstance(store, OutcomeStore)
    for n in range(30):
        client.recurring.save(f"r-{n:02d}", "t.x", every=3600)
        client.recurring.trigger(f"r-{n:02d}")
    calls: list[int] = []
    read = store.latest_outcomes

    def counted(job_ids: Any) -> Any:
        calls.append(len(job_ids))
        return read(job_ids)

    monkeypatch.setattr(store, "latest_outcomes", counted)
    assert web.get("/recurring").status_code == 200
    assert calls == [30]
    calls.clear()
    listed = _api(web, "GET", "/api/v1/recurring").get_json()["recurring"]
    assert calls == [30] and len(listed) == 30
    assert all(view["firing_outcomes"] == {} for view in listed)  # none recorded yet


def test_the_api_batches_the_outcomes_of_many_firings(
    make_app: Callable[..., Flask], client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More firings than one ``latest_outcomes`` call takes (1000): read in batches."""
    from parallel_scheduler.views import with_outcomes

    _needs_outcomes(client)
    store = client.storage
    assert isinstance(store, OutcomeStore)
    ids = [f"r-{n}@trigger-2030-01-01T00:00:00.{n:06d}Z" for n in range(1500)]
    store.record_outcomes([OutcomeEvent(ids[-1], "t.x", OutcomeState.SUCCEEDED, 1e9, "w")])
    views = [
        {"id": f"r-{n}", "recent_firings": [{"job_id": ids[n], "at": None, "trigger": True}]}
        for n in range(1500)
    ]
    views.append({"id": "flagged", "problem": "schedule cannot be decoded"})  # no firings key
    views.append({"id": "odd", "recent_firings": [{"job_id": "no\nway", "trigger": False}]})
    calls: list[int] = []
    read = store.latest_outcomes

    def counted(job_ids: Any) -> Any:
        calls.append(len(job_ids))
        return read(job_ids)

    monkeypatch.setattr(store, "latest_outcomes", counted)
    with make_app().test_request_context("/api/v1/recurring"):
        shown = with_outcomes(client, views)
    assert calls == [1000, 500]
    assert shown[1499]["last_outcome"]["state"] == "succeeded"
    assert shown[1499]["firing_outcomes"] == {ids[-1]: "succeeded"}
    assert shown[0]["last_outcome"] is None and shown[0]["firing_outcomes"] == {}
    assert shown[1500]["last_outcome"] is None and shown[1500]["firing_outcomes"] == {}
    assert shown[1501]["last_outcome"] is None and shown[1501]["firing_outcomes"] == {}
    assert shown[1499]["recent_firings"] == views[1499]["recent_firings"]  # items unchanged


def test_every_recurring_answer_of_the_api_carries_the_outcomes(
    web: FlaskClient, client: Client
) -> None:
    _needs_outcomes(client)
    fired = _fired(client)
    listed = _api(web, "GET", "/api/v1/recurring").get_json()["recurring"]
    by_id = {view["id"]: view for view in listed}
    failing = by_id["failing"]["last_outcome"]
    assert failing["job_id"] == fired["failing"][0] and failing["state"] == "failed"
    assert (failing["worker"], failing["runtime"], failing["error"]) == ("w1", 0.5, "E: x")
    assert by_id["pending"]["last_outcome"] is None
    older = fired["pending"][0]
    assert by_id["pending"]["firing_outcomes"] == {older: "succeeded"}
    assert set(by_id["pending"]["recent_firings"][0]) == {"job_id", "at", "trigger"}
    assert by_id["never"]["last_outcome"] is None and by_id["never"]["recent_firings"] == []
    assert by_id["never"]["firing_outcomes"] == {}
    assert by_id["failing"]["firing_outcomes"] == {fired["failing"][0]: "failed"}
    one = _api(web, "GET", "/api/v1/recurring/failing").get_json()
    assert one == by_id["failing"]
    for action in ("pause", "resume"):
        acted = _api(web, "POST", f"/api/v1/recurring/failing/{action}").get_json()
        assert acted["last_outcome"] == failing
    patched = _api(web, "PATCH", "/api/v1/recurring/failing", {"args": [1]}).get_json()
    assert patched["last_outcome"] == failing and patched["args"] == [1]


def test_a_history_entry_naming_no_usable_job_breaks_nothing(
    web: FlaskClient, client: Client
) -> None:
    """A recurring job's history as an older version or a hand might have written it: an entry
    whose job id no store accepts, one with no id at all. Shown, with no outcome; the page, the
    API and its outcomes read keep working."""
    from storage_adapters import ManualFiring, NewJob

    _needs_outcomes(client)
    store = client.storage
    assert isinstance(store, OutcomeStore)
    client.recurring.save("odd", "t.x", every=3600)
    now = store.now()
    job = NewJob("odd-manual-1", "t.x", '{"args":[],"kwargs":{},"options":{}}', now)
    history = [  # oldest first: the newest names a job id no store accepts
        {"tick": now, "job_id": job.id},
        {"tick": now, "job_id": 5},
        {"tick": now, "job_id": "bad\nid"},
    ]
    firing = ManualFiring(last_run_at=now, history=json.dumps(history), job=job)
    assert store.trigger_recurring("odd", stored(client, "odd").version, firing) is not None
    store.record_outcomes([OutcomeEvent(job.id, "t.x", OutcomeState.SUCCEEDED, now, "w")])
    page = web.get("/recurring")
    assert page.status_code == 200
    assert "(unreadable entry)" in page.get_data(as_text=True)
    assert 'firing-outcome outcome-succeeded">succeeded' in page.get_data(as_text=True)
    (view,) = _api(web, "GET", "/api/v1/recurring").get_json()["recurring"]
    assert view["firing_outcomes"] == {job.id: "succeeded"} and view["last_outcome"] is None
    assert _api(web, "GET", "/api/v1/recurring/odd").get_json() == view
