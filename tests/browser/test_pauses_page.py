"""The Pauses page in Chromium at laptop width: a pause made through its form is listed with a
long note and name cut to fit (the whole value on hover), the page is no wider than the window,
and its screenshot is a 1280x800 PNG."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parallel_scheduler import Client, JobState
from tests.browser.conftest import VIEWPORT

LONG_NAME = "reports." + "quarterly_revenue_reconciliation_" * 3  # 107 characters
LONG_NOTE = "the warehouse is migrating; hold every export until ticket OPS-4521 closes. " * 6


def test_the_pauses_page_at_laptop_width(
    page: Any, serve: Callable[..., str], client: Client, tmp_path: Path
) -> None:
    # Given a held job of a task paused with a long note, and the dashboard served
    client.schedule("emails.send", job_id="e1", queue="emails")
    client.pause_task(LONG_NAME, note=LONG_NOTE, by="ops@warehouse-01")
    url = serve(client)
    # When a queue is paused through the page's form
    page.goto(url + "/pauses?tz=Europe/Paris")
    page.select_option("#pause-kind", "queue")
    page.fill("#pause-name", "emails")
    page.fill("#pause-note", "smtp provider down")
    page.check("#pause-confirm")
    page.click("#pause-submit")
    # Then the message says what it held, and both pauses are listed, each with Resume
    assert page.inner_text("#flashes") == "paused queue 'emails': 1 scheduled job held"
    job = client.get("e1")
    assert job is not None and job.state is JobState.HELD
    rows = page.locator("#pauses-table tr.pause-row")
    assert rows.count() == 2
    assert page.locator("#pauses-table .resume-form button").count() == 2
    note = page.locator('tr.pause-row[data-kind="task"] td.pause-note .clip')
    assert note.get_attribute("title") == LONG_NOTE
    assert note.evaluate("e => e.scrollWidth > e.clientWidth")  # cut with an ellipsis
    since = page.locator('tr.pause-row[data-kind="queue"] td.col-time time.when')
    assert since.get_attribute("title").endswith(("+01:00", "+02:00"))  # the viewer's zone
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    shot = tmp_path / "pauses.png"
    page.screenshot(path=str(shot))  # the viewport: exactly 1280x800
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (VIEWPORT["width"], VIEWPORT["height"])
