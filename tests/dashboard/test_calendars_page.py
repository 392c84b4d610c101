"""The dashboard's Calendars page on every adapter: each calendar with its zone, its dates and
ranges (a long list folded under "and N more", every value escaped), who set it and the recurring
jobs that exclude it; the add-or-replace form (typed dates and ranges, an uploaded ``.ics`` file;
CSRF, a ticked box, an audit line, a message of what was saved; a refusal shows the form again
with the reason and writes nothing); Remove (saying how many jobs still name it); read-only mode
showing the calendars without a form."""

from __future__ import annotations

import html
import io
import logging
import re
from collections.abc import Callable
from urllib.parse import unquote

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from tests.dashboard.conftest import csrf_token

AUDIT = "parallel_scheduler.dashboard.audit"
ICS = (
    "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n"
    "DTEND;VALUE=DATE:20261227\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def _text(response: object) -> str:
    return html.unescape(response.get_data(as_text=True))  # type: ignore[attr-defined]


def _row(page: str, name: str) -> str:
    found = re.search(
        rf'<tr class="calendar-row" data-name="{re.escape(html.escape(name))}">(.*?)</tr>',
        page,
        re.S,
    )
    assert found is not None, page
    return found.group(1)


def _audit(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT]


def test_the_page_lists_each_calendar_its_dates_and_the_jobs_excluding_it(
    web: FlaskClient, client: Client
) -> None:
    many = [f"2027-01-{day:02d}" for day in range(1, 31, 2)]  # 15 single days, none touching
    client.put_calendar("<b>x</b>", ["2026-12-24..2026-12-26", *many], "Europe/Berlin", "o<p>s")
    client.put_calendar("empty", [], "UTC")
    client.recurring.save("r-<i>1</i>", "t.r", "0 9 * * *", exclude=["<b>x</b>"])
    client.recurring.save("r-2", "t.r", "0 9 * * *", exclude=["<b>x</b>", "empty"])
    page = web.get("/calendars")
    raw = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="nav-calendars"' in raw
    # every name, who and job id is escaped, never markup
    assert "<b>x</b>" not in raw and "&lt;b&gt;x&lt;/b&gt;" in raw
    assert "o<p>s" not in raw and "r-<i>1</i>" not in raw
    row = _row(raw, "<b>x</b>")
    assert "Europe/Berlin" in row and "18 day(s):" in row and "2026-12-25" not in row
    assert '<span class="calendar-range">2026-12-24..2026-12-26</span>' in row
    assert '<span class="calendar-range">2027-01-01</span>' in row
    # 16 ranges: 12 shown, the other 4 folded under "and 4 more" with the count in its title
    assert row.count('class="calendar-range"') == 16
    assert re.search(r'<summary title="16 ranges in all">and 4 more</summary>', row)
    jobs = re.findall(r'<a class="calendar-job" href="/recurring/edit\?id=([^"]+)"', row)
    assert [unquote(html.unescape(link)) for link in jobs] == ["r-2", "r-<i>1</i>"]
    empty = _row(raw, "empty")
    assert "0 day(s):" in empty and "none" in empty and "r-2" in empty
    assert "calendar-remove-form" in row and 'id="calendar-form"' in raw


def test_the_form_saves_a_calendar_from_dates_ranges_and_an_ics_file(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    assert 'id="no-calendars"' in web.get("/calendars").get_data(as_text=True)
    token = csrf_token(web, "/calendars")
    form = {
        "name": "holidays-de",
        "timezone": "Europe/Berlin",
        "dates": "2026-05-01, 2026-10-03\n2026-12-31",
        "ranges": "2026-08-01..2026-08-14",
        "confirm": "yes",
    }
    # Refused without the CSRF token, or without the ticked box: nothing written
    assert web.post("/calendars/save", data=form).status_code == 400
    assert web.post("/calendars/save", data={**form, "csrf_token": "forged"}).status_code == 400
    unticked = {k: v for k, v in form.items() if k != "confirm"}
    refused = web.post("/calendars/save", data={**unticked, "csrf_token": token})
    assert refused.status_code == 400 and "confirm" in _text(refused)
    assert client.calendars() == []
    # When posted whole with an .ics file, every date is saved, said, and audited
    upload = {**form, "csrf_token": token, "ics": (io.BytesIO(ICS.encode()), "xmas.ics")}
    done = web.post("/calendars/save", data=upload, content_type="multipart/form-data")
    assert done.status_code == 303, _text(done)
    (saved,) = client.calendars()
    assert (saved.name, saved.timezone) == ("holidays-de", "Europe/Berlin")
    assert saved.ranges == (
        ("2026-05-01", "2026-05-01"),
        ("2026-08-01", "2026-08-14"),
        ("2026-10-03", "2026-10-03"),
        ("2026-12-25", "2026-12-26"),
        ("2026-12-31", "2026-12-31"),
    )
    assert saved.set_by.startswith("anonymous@")
    shown = _text(web.get(done.headers["Location"]))
    assert "calendar 'holidays-de' saved: 5 range(s), 19 day(s) in Europe/Berlin" in shown
    (line,) = _audit(caplog)
    assert "action=put_calendar ids=holidays-de ranges=5 timezone=Europe/Berlin" in line
    # Saving the same name again replaces it whole
    again = {"name": "holidays-de", "timezone": "UTC", "dates": "2027-01-01", "ranges": ""}
    again_done = web.post("/calendars/save", data={**again, "confirm": "yes", "csrf_token": token})
    assert again_done.status_code == 303
    (replaced,) = client.calendars()
    assert (replaced.timezone, replaced.ranges) == ("UTC", (("2027-01-01", "2027-01-01"),))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"name": "has space"}, "must be printable, without spaces or commas"),
        ({"timezone": "Nowhere/City"}, "calendar time zone must be an IANA zone name"),
        ({"dates": "2026-12-32"}, "a calendar date must be an ISO date (YYYY-MM-DD)"),
        ({"ranges": "2026-12-26..2026-12-25"}, "ends before it starts"),
        ({"ranges": "2026-12-26"}, "not ''"),
        ({"ics": b"BEGIN:VEVENT\r\nDTSTART:bad\r\nEND:VEVENT\r\n"}, "cannot read the date"),
        ({"ics": b"\xff\xfe"}, "cannot import 'a.ics': it is not UTF-8 text"),
    ],
)
def test_a_refused_form_is_shown_again_with_the_reason_and_writes_nothing(
    web: FlaskClient, client: Client, fields: dict[str, object], words: str
) -> None:
    client.put_calendar("kept", ["2026-01-01"])
    form = {"name": "new", "timezone": "UTC", "dates": "2026-12-25", "confirm": "yes", **fields}
    if isinstance(form.get("ics"), bytes):  # a new file each run: a stream is read once
        form["ics"] = (io.BytesIO(form["ics"]), "a.ics")  # type: ignore[arg-type]
    form["csrf_token"] = csrf_token(web, "/calendars")
    refused = web.post("/calendars/save", data=form, content_type="multipart/form-data")
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    error = re.search(r'<p id="calendar-error" class="error">(.*?)</p>', page)
    assert error is not None and words in html.unescape(error.group(1)), page
    typed = str(form["name"])
    assert f'value="{html.escape(typed)}"' in page  # what was typed is shown again
    assert [c.name for c in client.calendars()] == ["kept"]


def test_remove_says_how_many_jobs_still_name_it(
    web: FlaskClient, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    client.put_calendar("de", ["2026-12-25"])
    client.recurring.save("r", "t.r", "0 9 * * *", exclude=["de"])
    token = csrf_token(web, "/calendars")
    form = {"name": "de", "csrf_token": token}
    refused = web.post("/calendars/remove", data=form)
    assert refused.status_code == 400 and "confirm" in _text(refused)
    assert [c.name for c in client.calendars()] == ["de"]
    done = web.post("/calendars/remove", data={**form, "confirm": "yes"})
    assert done.status_code == 303 and client.calendars() == []
    shown = _text(web.get(done.headers["Location"]))
    assert (
        "removed calendar 'de'; 1 recurring job(s) still name it and fire as if it were empty"
        in shown
    )
    again = web.post("/calendars/remove", data={**form, "confirm": "yes"})
    assert "no calendar 'de': nothing changed" in _text(web.get(again.headers["Location"]))
    assert [line.split("action=")[1] for line in _audit(caplog)] == [
        "remove_calendar ids=de removed=True",
        "remove_calendar ids=de removed=False",
    ]
    assert client.recurring.get("r") is not None


def test_remove_counts_every_job_naming_it_past_the_first_thousand(
    web: FlaskClient, client: Client
) -> None:
    # Given 1,205 recurring jobs, of which the 5 with the highest ids (past the first 1,000 the
    # page itself reads) and 2 early ones exclude calendar "de"
    client.put_calendar("de", ["2026-12-25"])
    client.recurring.save_many(
        {"id": f"r{n:04d}", "task": "t.r", "cron": "0 9 * * *",
         "exclude": ["de"] if n >= 1200 or n in (3, 7) else []}
        for n in range(1205)
    )  # fmt: skip
    # When the calendar is removed from the page, then the count is of all 7
    form = {"name": "de", "csrf_token": csrf_token(web, "/calendars"), "confirm": "yes"}
    done = web.post("/calendars/remove", data=form)
    assert done.status_code == 303 and client.calendars() == []
    assert "7 recurring job(s) still name it" in _text(web.get(done.headers["Location"]))


def test_read_only_shows_the_calendars_but_no_form(
    make_app: Callable[..., Flask], client: Client
) -> None:
    client.put_calendar("de", ["2026-12-25"], by="ops")
    web = make_app(read_only=True).test_client()
    page = web.get("/calendars").get_data(as_text=True)
    assert "2026-12-25" in page and 'method="post"' not in page
    refused = web.post("/calendars/remove", data={"name": "de", "confirm": "yes"})
    assert refused.status_code == 403
    form = {"name": "x", "timezone": "UTC", "dates": "2026-01-01", "confirm": "yes"}
    assert web.post("/calendars/save", data=form).status_code == 403
    assert [c.name for c in client.calendars()] == ["de"]
