"""One bad pause through every door (issue 25, item 1): the Client, the command line, the
dashboard's form and the HTTP API each refuse the same bad kind, name or note with the words of
storage's own check (``storage_adapters/checks/pauses.py``), and write nothing: no pause, and the
job that a pause would hold stays scheduled. On every adapter."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Client, JobState
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import InvalidArgumentError
from storage_adapters.checks.pauses import check_pause, check_pause_name
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes
_FORM_ERROR = re.compile(r'<p id="pause-error" class="error">(.*?)</p>', re.S)

#: Each bad pause: ``(kind, name, note)``.
BAD: dict[str, tuple[str, str, str]] = {
    "bad kind": ("topic", "emails", ""),
    "empty name": ("queue", "", ""),
    "name with a newline": ("queue", "emails\nnow", ""),
    "1001-character note": ("queue", "emails", "n" * 1001),
}


def expected(kind: str, name: str, note: str) -> str:
    with pytest.raises(InvalidArgumentError) as refused:
        check_pause(kind, name, note, "someone")
    return str(refused.value)


def _client(target: Store, kind: str, name: str, note: str, capsys: Any) -> str:
    with pytest.raises(InvalidArgumentError) as refused:
        Client(target.storage).pause(kind, name, note)
    return str(refused.value)


def _command_line(target: Store, kind: str, name: str, note: str, capsys: Any) -> str:
    capsys.readouterr()
    command = ["--storage-url", target.url, "--prefix", target.prefix]
    code = main([*command, kind, "pause", name, "--note", note])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("parallel-scheduler: error: ")]
    assert len(lines) == 1, err
    return lines[0].removeprefix("parallel-scheduler: error: ")


def _web(target: Store) -> Any:
    app = create_app(Client(target.storage, retry_for=1.0))
    app.testing = True
    return app.test_client()


def _dashboard_form(target: Store, kind: str, name: str, note: str, capsys: Any) -> str:
    web = _web(target)
    token = csrf_token(web, "/pauses")
    fields = {"csrf_token": token, "kind": kind, "name": name, "note": note, "confirm": "yes"}
    page = web.post("/pauses/pause", data=fields)
    assert page.status_code == 400, page.data
    text = page.get_data(as_text=True)
    found = _FORM_ERROR.search(text)
    assert found is not None, text
    # the form is shown again with what was typed
    assert name in html.unescape(text)
    return html.unescape(found.group(1))


def _http_api(target: Store, kind: str, name: str, note: str, capsys: Any) -> str:
    answer = _web(target).post(
        "/api/v1/pauses", json={"kind": kind, "name": name, "note": note}, headers=BEARER
    )
    assert answer.status_code == 400, answer.data
    return str(answer.get_json()["error"]["message"])


DOORS: dict[str, Callable[..., str]] = {
    "Client.pause": _client,
    "command line": _command_line,
    "dashboard form": _dashboard_form,
    "HTTP API": _http_api,
}


#: Every (door, case) pair: the command line names the kind by its command (``queue`` or
#: ``task``), so it cannot be given a bad one.
PAIRS = [
    (door, case)
    for door in DOORS
    for case, (kind, _, _) in BAD.items()
    if door != "command line" or kind in ("queue", "task")
]


@pytest.mark.parametrize(("door", "case"), PAIRS)
def test_a_bad_pause_is_refused_in_the_same_words_at_every_door(
    adapter_kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    door: str,
    case: str,
) -> None:
    kind, name, note = BAD[case]
    for target in opened(Store, adapter_kind, tmp_path):
        # Given a scheduled job of the queue and task a pause would hold
        Client(target.storage).schedule("emails", job_id="j", queue="emails")
        message = DOORS[door](target, kind, name, note, capsys)
        assert message == expected(kind, name, note)
        assert target.storage.list_pauses() == []
        job = target.storage.get_job("j")
        assert job is not None and job.state is JobState.SCHEDULED


@pytest.mark.parametrize(("kind", "name"), [("topic", "emails"), ("queue", " emails")])
def test_a_bad_resume_is_refused_in_the_same_words(
    adapter_kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    name: str,
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        check_pause_name(kind, name)
    words = str(refused.value)
    for target in opened(Store, adapter_kind, tmp_path):
        Client(target.storage).pause_task("emails")
        with pytest.raises(InvalidArgumentError, match=re.escape(words)):
            Client(target.storage).resume(kind, name)
        web = _web(target)
        answer = web.delete(f"/api/v1/pauses/{kind}/{name}", headers=BEARER)
        assert answer.status_code == 400 and answer.get_json()["error"]["message"] == words
        token = csrf_token(web, "/pauses")
        fields = {"csrf_token": token, "kind": kind, "name": name, "confirm": "yes"}
        page = web.post("/pauses/resume", data=fields)
        assert page.status_code == 400 and words in html.unescape(page.get_data(as_text=True))
        if kind == "queue":
            capsys.readouterr()
            command = ["--storage-url", target.url, "--prefix", target.prefix]
            assert main([*command, kind, "resume", name]) == 2
            assert words in capsys.readouterr().err
        assert [p.name for p in target.storage.list_pauses()] == ["emails"]
