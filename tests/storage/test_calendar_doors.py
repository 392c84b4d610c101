"""One bad calendar, refused the same way at every door, on every adapter: ``Client.put_calendar``,
``parallel-scheduler calendar add`` (exit status 2, one error line), ``PUT /api/v1/calendars/NAME``
(a 400) and the dashboard's Calendars form (a 400, the form shown again with the reason). Each
says the words of storage's own check (``checks/calendars.py``, asked directly here) and writes
nothing: the calendar already kept stays as it was."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from parallel_scheduler import Client
from parallel_scheduler.calendars import parse_dates
from parallel_scheduler.cli import main
from parallel_scheduler.dashboard import create_app
from storage_adapters import InvalidArgumentError
from storage_adapters.checks.calendars import check_calendar
from tests.dashboard.conftest import csrf_token
from tests.storage.entry_points import Store, opened

BEARER = {"Authorization": "Bearer anything-at-all"}  # no auth configured: any bearer passes

#: Each bad calendar: its name, time zone, single dates and FIRST..LAST ranges.
Bad = tuple[str, str, list[str], list[str]]
BAD: dict[str, Bad] = {
    "name": ("has space", "UTC", ["2026-12-25"], []),
    "comma": ("a,b", "UTC", ["2026-12-25"], []),
    "zone": ("holidays", "Nowhere/City", ["2026-12-25"], []),
    "date": ("holidays", "UTC", ["2026-12-32"], []),
    "order": ("holidays", "Europe/Berlin", [], ["2026-12-26..2026-12-25"]),
}


def _words(bad: Bad) -> str:
    """What storage's check says of ``bad``: the words every door must say."""
    name, zone, dates, ranges = bad
    with pytest.raises(InvalidArgumentError) as refused:
        check_calendar(name, zone, parse_dates(dates, ranges), "someone")
    return str(refused.value)


@pytest.fixture
def target(adapter_kind: str, tmp_path: Path) -> Iterator[Store]:
    for store in opened(Store, adapter_kind, tmp_path):
        Client(store.storage).put_calendar("kept", ["2026-01-01"], "Europe/Berlin", "ops")
        yield store


def _client(target: Store, bad: Bad, _: Any) -> str:
    name, zone, dates, ranges = bad
    with pytest.raises(InvalidArgumentError) as refused:
        Client(target.storage).put_calendar(name, [*dates, *ranges], zone)
    return str(refused.value)


def _cli(target: Store, bad: Bad, capsys: Any) -> str:
    name, zone, dates, ranges = bad
    capsys.readouterr()
    argv = ["--storage-url", target.url, "--prefix", target.prefix, "calendar", "add", name]
    words = [f"--dates={','.join(dates)}"] if dates else []
    words += [f"--range={text}" for text in ranges]
    code = main([*argv, *words, f"--timezone={zone}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err, (code, out, err)
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith("parallel-scheduler: error: "), line
    return str(line)


def _api(target: Store, bad: Bad, _: Any) -> str:
    name, zone, dates, ranges = bad
    web = create_app(Client(target.storage, retry_for=1.0)).test_client()
    body = {"dates": [*dates, *ranges], "timezone": zone}
    refused = web.put(f"/api/v1/calendars/{quote(name)}", json=body, headers=BEARER)
    assert refused.status_code == 400, refused.data
    assert refused.get_json()["error"]["code"] == "bad_request"
    return str(refused.get_json()["error"]["message"])


def _form(target: Store, bad: Bad, _: Any) -> str:
    name, zone, dates, ranges = bad
    web = create_app(Client(target.storage, retry_for=1.0)).test_client()
    form = {"name": name, "timezone": zone, "dates": " ".join(dates), "ranges": " ".join(ranges)}
    form.update(confirm="yes", csrf_token=csrf_token(web, "/calendars"))
    refused = web.post("/calendars/save", data=form)
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    shown = re.search(r'<p id="calendar-error" class="error">(.*?)</p>', page)
    assert shown is not None, page
    assert f'value="{html.escape(zone)}"' in page  # what was typed is shown again
    return html.unescape(shown.group(1))


DOORS: dict[str, Callable[[Store, Bad, Any], str]] = {
    "client": _client,
    "cli": _cli,
    "api": _api,
    "form": _form,
}


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("door", DOORS)
def test_every_door_refuses_a_bad_calendar_in_the_checks_words_and_writes_nothing(
    target: Store, door: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = BAD[case]
    before = target.storage.list_calendars()
    message = DOORS[door](target, bad, capsys)
    assert _words(bad) in message, message
    assert "\n" not in message
    assert target.storage.list_calendars() == before
    assert [(c.name, c.ranges) for c in before] == [("kept", (("2026-01-01", "2026-01-01"),))]
