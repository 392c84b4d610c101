"""A recurring job's pause carries a note, who paused it and since when (issue 25 §5), at every
door: the Client, the command line (``recurring pause ID --note``, ``recurring list [--json]``),
the dashboard's Recurring page and form, and the HTTP API. The same bad note is refused at each
with the words of storage's own check (``check_pause_note``) and writes nothing. On every
adapter, with real servers."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.pausing import pauser
from storage_adapters import InvalidArgumentError
from storage_adapters.checks.pauses import check_pause_note
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes
NOTE = 'reports DB migration <script>alert("x")</script> & more'


def _web(target: Store) -> Any:
    app = create_app(Client(target.storage, retry_for=1.0))
    app.testing = True
    return app.test_client()


def _cli(target: Store, *args: str) -> list[str]:
    return ["--storage-url", target.url, "--prefix", target.prefix, "recurring", *args]


def _saved(target: Store) -> Client:
    client = Client(target.storage)
    client.recurring.save("nightly", "reports.build", "0 2 * * *")
    return client


def test_the_client_keeps_the_note_who_and_when_and_resume_clears_them(
    adapter_kind: str, tmp_path: Path
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = _saved(target)
        assert client.pause_recurring("nightly", note=NOTE, by="ops@example.com")
        paused = client.recurring.get("nightly")
        assert paused is not None and not paused.enabled
        assert (paused.pause_note, paused.paused_by) == (NOTE, "ops@example.com")
        assert paused.paused_at is not None
        view = paused.to_dict()
        assert (view["pause_note"], view["paused_by"]) == (NOTE, "ops@example.com")
        assert view["paused_at"] == paused.paused_at.isoformat()
        assert client.pause_recurring("nightly")  # who: user@host of this process
        again = client.recurring.get("nightly")
        assert again is not None
        assert (again.pause_note, again.paused_by) == ("", pauser())
        assert again.paused_at == paused.paused_at  # since when stays
        assert client.resume_recurring("nightly")
        resumed = client.recurring.get("nightly")
        assert resumed is not None and resumed.enabled
        assert (resumed.pause_note, resumed.paused_by, resumed.paused_at) == (None, None, None)


def test_the_command_line_pauses_with_a_note_and_lists_it(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        _saved(target)
        capsys.readouterr()
        assert main(_cli(target, "pause", "nightly", "--note", "disk full")) == 0
        assert capsys.readouterr().out.strip() == "nightly paused"
        assert main(_cli(target, "list")) == 0
        listing = capsys.readouterr().out
        assert f"by {pauser()}: disk full" in listing and "since " in listing
        assert main(_cli(target, "list", "--json")) == 0
        (view,) = json.loads(capsys.readouterr().out)
        assert (view["pause_note"], view["paused_by"]) == ("disk full", pauser())
        assert view["paused_at"] is not None and not view["enabled"]
        assert main(_cli(target, "resume", "nightly")) == 0
        assert capsys.readouterr().out.strip() == "nightly resumed"
        assert main(_cli(target, "list", "--json")) == 0
        (view,) = json.loads(capsys.readouterr().out)
        assert (view["pause_note"], view["paused_by"], view["paused_at"]) == (None, None, None)


def test_the_http_api_takes_a_note_and_answers_the_fields(
    adapter_kind: str, tmp_path: Path
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        _saved(target)
        web = _web(target)
        answer = web.post(
            "/api/v1/recurring/nightly/pause", json={"note": "quarter end"}, headers=BEARER
        )
        assert answer.status_code == 200, answer.data
        body = answer.get_json()
        assert (body["enabled"], body["pause_note"]) == (False, "quarter end")
        assert body["paused_by"].endswith("@127.0.0.1") and body["paused_at"]
        listed = web.get("/api/v1/recurring", headers=BEARER).get_json()["recurring"]
        assert listed[0]["pause_note"] == "quarter end"
        bare = web.post("/api/v1/recurring/nightly/pause", headers=BEARER)  # no body: no note
        assert bare.status_code == 200 and bare.get_json()["pause_note"] == ""
        unknown = web.post("/api/v1/recurring/nightly/pause", json={"why": "x"}, headers=BEARER)
        assert unknown.status_code == 400 and "'why'" in unknown.get_json()["error"]["message"]
        resumed = web.post("/api/v1/recurring/nightly/resume", headers=BEARER).get_json()
        assert (resumed["pause_note"], resumed["paused_by"], resumed["paused_at"]) == (
            None,
            None,
            None,
        )
        schema = web.get("/api/v1/openapi.json", headers=BEARER).get_json()
        assert {"pause_note", "paused_by", "paused_at"} <= set(
            schema["components"]["schemas"]["Recurring"]["properties"]
        )
        assert "note" in schema["components"]["schemas"]["RecurringPause"]["properties"]


def test_the_dashboard_form_takes_a_note_and_the_page_shows_it_escaped(
    adapter_kind: str, tmp_path: Path
) -> None:
    for target in opened(Store, adapter_kind, tmp_path):
        client = _saved(target)
        web = _web(target)
        token = csrf_token(web, "/recurring")
        assert 'name="note"' in web.get("/recurring").get_data(as_text=True)
        fields = {"csrf_token": token, "id": "nightly", "action": "pause", "confirm": "yes"}
        assert web.post("/recurring/action", data={**fields, "note": NOTE}).status_code == 303
        paused = client.recurring.get("nightly")
        assert paused is not None and paused.pause_note == NOTE
        assert paused.paused_by is not None and paused.paused_by.endswith("@127.0.0.1")
        page = web.get("/recurring").get_data(as_text=True)
        assert "<script>alert" not in page  # shown as text, never as markup
        assert f">{escape(NOTE)}</span>" in page
        assert f'class="paused-by">by {paused.paused_by}<' in page


def _refused_by_client(target: Store, note: str, capsys: Any) -> str:
    with pytest.raises(InvalidArgumentError) as refused:
        Client(target.storage).pause_recurring("nightly", note=note)
    return str(refused.value)


def _refused_by_command_line(target: Store, note: str, capsys: Any) -> str:
    capsys.readouterr()
    code = main(_cli(target, "pause", "nightly", "--note", note))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("parallel-scheduler: error: ")]
    assert len(lines) == 1, err
    return lines[0].removeprefix("parallel-scheduler: error: ")


def _refused_by_http_api(target: Store, note: str, capsys: Any) -> str:
    answer = _web(target).post(
        "/api/v1/recurring/nightly/pause", json={"note": note}, headers=BEARER
    )
    assert answer.status_code == 400, answer.data
    return str(answer.get_json()["error"]["message"])


def _refused_by_dashboard_form(target: Store, note: str, capsys: Any) -> str:
    web = _web(target)
    token = csrf_token(web, "/recurring")
    fields = {"csrf_token": token, "id": "nightly", "action": "pause", "confirm": "yes"}
    page = web.post("/recurring/action", data={**fields, "note": note})
    assert page.status_code == 400, page.data
    return html.unescape(page.get_data(as_text=True))


DOORS: dict[str, Callable[..., str]] = {
    "Client.pause_recurring": _refused_by_client,
    "command line": _refused_by_command_line,
    "HTTP API": _refused_by_http_api,
    "dashboard form": _refused_by_dashboard_form,
}


@pytest.mark.parametrize("door", DOORS)
def test_a_bad_note_is_refused_in_the_same_words_at_every_door_and_writes_nothing(
    adapter_kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], door: str
) -> None:
    note = "n" * 1001
    with pytest.raises(InvalidArgumentError) as checked:
        check_pause_note(note, "someone")
    words = str(checked.value)
    for target in opened(Store, adapter_kind, tmp_path):
        _saved(target)
        before = target.storage.get_recurring("nightly")
        message = DOORS[door](target, note, capsys)
        assert words in message
        if door != "dashboard form":  # the form's error page holds more than the words
            assert message == words
        assert target.storage.get_recurring("nightly") == before
