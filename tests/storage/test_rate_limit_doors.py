"""One bad rate limit, refused the same way at every door, on every adapter: ``Client.limit``,
``parallel-scheduler queue|task limit`` (exit status 2, one error line), ``POST /api/v1/limits``
(a 400) and the dashboard's form (a 400, the page shown again with the reason). Each names the
problem in the same words and writes nothing: the limit already in force stays as it was. Then
a limit set, listed and removed through ``Client``'s methods."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from parallel_scheduler import Client
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import InvalidArgumentError, PauseKind
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes

#: Each bad limit (kind, name, rate, burst) and the words every door says of it.
BAD: dict[str, tuple[tuple[str, str, str, int], str]] = {
    "words": (("queue", "emails", "ten/s", 1), "not 'ten' (in 'ten/s')"),
    "zero": (("queue", "emails", "0/s", 1), "whole number of 1-1,000,000, not '0' (in '0/s')"),
    "no-unit": (("queue", "emails", "100", 1), "a rate is COUNT/UNIT"),
    "days": (("task", "mail.send", "100/d", 1), "unit is s, m or h (also sec, min, hour), not 'd'"),
    "negative": (("task", "mail.send", "-1/s", 1), "not '-1' (in '-1/s')"),
    "over": (("queue", "emails", "1000001/s", 1), "not '1000001'"),
    "burst": (("queue", "emails", "100/s", 0), "a rate limit's burst must be a whole number"),
    "kind": (("topic", "emails", "100/s", 1), "a rate limit names a 'queue' or a 'task'"),
    "name": (("queue", " emails", "100/s", 1), "without leading or trailing spaces"),
}


@pytest.fixture
def target(adapter_kind: str, tmp_path: Path) -> Iterator[Store]:
    for store in opened(Store, adapter_kind, tmp_path):
        Client(store.storage).limit_queue("other", "5/s", burst=2, by="ops")
        yield store


def _client(target: Store, bad: tuple[str, str, str, int], _: Any) -> str:
    with pytest.raises(InvalidArgumentError) as refused:
        Client(target.storage).limit(*bad)
    return str(refused.value)


def _cli(target: Store, bad: tuple[str, str, str, int], capsys: Any) -> str:
    kind, name, rate, burst = bad
    capsys.readouterr()
    argv = ["--storage-url", target.url, "--prefix", target.prefix]
    code = main([*argv, kind, "limit", name, f"--rate={rate}", f"--burst={burst}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err, (code, out, err)
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith("parallel-scheduler: error: "), line
    return line


def _api(target: Store, bad: tuple[str, str, str, int], _: Any) -> str:
    kind, name, rate, burst = bad
    web = create_app(Client(target.storage, retry_for=1.0)).test_client()
    body = {"kind": kind, "name": name, "rate": rate, "burst": burst}
    refused = web.post("/api/v1/limits", json=body, headers=BEARER)
    assert refused.status_code == 400, refused.data
    assert refused.get_json()["error"]["code"] == "bad_request"
    return str(refused.get_json()["error"]["message"])


def _form(target: Store, bad: tuple[str, str, str, int], _: Any) -> str:
    kind, name, rate, burst = bad
    web = create_app(Client(target.storage, retry_for=1.0)).test_client()
    form = {"kind": kind, "name": name, "rate": rate, "burst": str(burst), "confirm": "yes"}
    refused = web.post("/pauses/limit", data={**form, "csrf_token": csrf_token(web, "/pauses")})
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    shown = re.search(r'<p id="limit-error" class="error">(.*?)</p>', page)
    assert shown is not None, page
    assert f'value="{html.escape(rate)}"' in page  # what was typed is shown again
    return html.unescape(shown.group(1))


DOORS: dict[str, Callable[[Store, tuple[str, str, str, int], Any], str]] = {
    "client": _client,
    "cli": _cli,
    "api": _api,
    "form": _form,
}


#: Every door with every bad limit, but another kind on the command line (no such command there).
CASES = [(door, case) for door in DOORS for case in BAD if (door, case) != ("cli", "kind")]


@pytest.mark.parametrize(("door", "case"), CASES)
def test_every_door_refuses_a_bad_limit_by_name_and_writes_nothing(
    target: Store, door: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, words = BAD[case]
    before = Client(target.storage).rate_limits()
    message = DOORS[door](target, bad, capsys)
    assert words in message, message
    assert "\n" not in message
    assert Client(target.storage).rate_limits() == before
    assert [(limit.name, limit.count, limit.burst) for limit in before] == [("other", 5, 2)]


def test_the_client_sets_lists_replaces_and_removes_limits(target: Store) -> None:
    client = Client(target.storage)
    client.limit_queue("emails", "100/s")
    client.limit_task("mail.send", "30/m", burst=10, by="ops@h1")
    client.limit("task", "reports.build", "2/hour")
    shown = {(limit.kind, limit.name): limit for limit in client.rate_limits()}
    assert list(shown) == [
        (PauseKind.QUEUE, "emails"),
        (PauseKind.QUEUE, "other"),
        (PauseKind.TASK, "mail.send"),
        (PauseKind.TASK, "reports.build"),
    ]
    emails = shown[PauseKind.QUEUE, "emails"]
    assert (emails.count, emails.period, emails.burst) == (100, 1.0, 1)
    assert "@" in emails.set_by  # user@host of this process
    mail = shown[PauseKind.TASK, "mail.send"]
    assert (mail.count, mail.period, mail.burst, mail.set_by) == (30, 60.0, 10, "ops@h1")
    assert shown[PauseKind.TASK, "reports.build"].period == 3600.0
    # setting again replaces the numbers and who, keeping when it was first set
    client.limit_queue("emails", "5/h", burst=3, by="ops@h2")
    (again,) = [limit for limit in client.rate_limits() if limit.name == "emails"]
    assert (again.count, again.period, again.burst, again.set_by) == (5, 3600.0, 3, "ops@h2")
    assert again.set_at == pytest.approx(emails.set_at)
    # removing says whether one was in force
    assert client.unlimit_queue("emails") is True
    assert client.unlimit_queue("emails") is False
    assert client.unlimit_task("mail.send") is True
    assert client.unlimit("task", "reports.build") is True
    assert [limit.name for limit in client.rate_limits()] == ["other"]
    with pytest.raises(InvalidArgumentError, match="a rate limit names a 'queue' or a 'task'"):
        client.unlimit("topic", "other")
