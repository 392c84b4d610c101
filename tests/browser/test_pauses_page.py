"""The Pauses page in Chromium at laptop width: a pause made through its form is listed with a
long note and name cut to fit (the whole value on hover), and so is a rate limit set through its
form beside one of a long task name; the page is no wider than the window, and its screenshot is
a 1280x800 PNG."""

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
    # When a queue is rate-limited through the limit form, beside a task of a long name
    client.limit_task(LONG_NAME, "30/m", burst=10, by="ops@warehouse-01")
    page.goto(url + "/pauses?tz=Europe/Paris")
    page.select_option("#limit-kind", "queue")
    page.fill("#limit-name", "emails")
    page.fill("#limit-rate", "100/s")
    page.fill("#limit-burst", "5")
    page.check("#limit-confirm")
    page.click("#limit-submit")
    # Then the message says so, and both limits are listed, each with Remove
    assert page.inner_text("#flashes") == "limited queue 'emails' to 100/s (burst 5)"
    limits = {lim.name: (lim.count, lim.burst) for lim in client.rate_limits()}
    assert limits == {"emails": (100, 5), LONG_NAME: (30, 10)}
    assert page.locator("#limits-table tr.limit-row").count() == 2
    assert page.locator("#limits-table .unlimit-form button").count() == 2
    name = page.locator('tr.limit-row[data-kind="task"] .limit-name')
    assert name.get_attribute("title") == LONG_NAME
    assert page.inner_text('tr.limit-row[data-kind="queue"] td.limit-rate') == "100/s"
    # a bad rate is refused on the page, by name, and nothing is written
    page.fill("#limit-name", "other")
    page.fill("#limit-rate", "ten/s")
    page.check("#limit-confirm")
    page.click("#limit-submit")
    assert "not 'ten' (in 'ten/s')" in page.inner_text("#limit-error")
    assert len(client.rate_limits()) == 2
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    shot = tmp_path / "pauses.png"
    page.screenshot(path=str(shot))  # the viewport: exactly 1280x800
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (VIEWPORT["width"], VIEWPORT["height"])
