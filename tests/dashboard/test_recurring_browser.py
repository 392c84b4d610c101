"""The recurring jobs' edit form and list page in Debian's headless Chromium (Playwright through
``executable_path``; nothing downloaded, never skipped), on every storage adapter: the edit form
changes the arguments and queue and keeps the rest, bad JSON is refused by name with nothing
written, and the list shows each job's last outcome as a coloured badge with every row one line
high and no page wider than the window at 1280x800 and 390x844.

It runs the browser tier's way (``tests/browser/conftest.py``: its Chromium, its in-process
server) with the dashboard tier's stores, one per adapter. Each test drives its own Chromium from
a thread of its own, started and stopped within the test: Playwright's sync API allows one
instance per thread, and the browser tier keeps one open for its whole session in the main thread
of a worker that may run this file too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from storage_adapters import OutcomeEvent, OutcomeState, OutcomeStore
from tests.browser.conftest import CHROMIUM, STEP_TIMEOUT_MS, Served
from tests.browser.data import fill

pytestmark = pytest.mark.timeout(90)

SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
LONG_RECURRING = ("nightly-" + "a" * 120)[:120]
LONG_TASK = "reports." + "quarterly_revenue_reconciliation_" * 2 + "x" * 6
#: ``.badge-failed``'s background in the stylesheet.
FAILED_RED = "rgb(164, 14, 38)"


def in_chromium(drive: Callable[[Any], None]) -> None:
    """``drive(browser)`` with the distribution's headless Chromium, launched as the browser tier
    launches it, in a thread of its own (see above); its failure is raised here."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: see tests/browser/conftest.py for how to get it")
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
                )
                try:
                    drive(browser)
                finally:
                    browser.close()
        except BaseException as exc:  # raised again in the test's own thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="chromium", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


@pytest.fixture
def served(client: Client) -> Iterator[str]:
    """The dashboard over the test's store, served over HTTP; its URL."""
    server = Served(create_app(client))
    try:
        yield server.url
    finally:
        server.stop()


def _page(chromium: Any, size: dict[str, int] = SIZES[0]) -> Any:
    context = chromium.new_context(viewport=size, timezone_id="UTC")
    context.set_default_timeout(STEP_TIMEOUT_MS)
    return context.new_page()


def test_the_edit_form_changes_args_and_queue_and_refuses_bad_json(
    served: str, client: Client
) -> None:
    client.recurring.save(
        "nightly",
        "reports.build",
        "30 2 * * *",
        args=["eu"],
        kwargs={"format": "csv"},
        timezone="Europe/Paris",
        misfire_policy="skip",
        queue="reports",
        priority=5,
    )
    before = client.recurring.get("nightly")
    row = client.storage.get_recurring("nightly")
    assert before is not None and row is not None
    in_chromium(lambda chromium: _edit(chromium, served, client, before, row))


def _edit(chromium: Any, served: str, client: Client, before: Any, row: Any) -> None:
    page = _page(chromium)
    try:
        page.goto(served + "/recurring")
        listed = page.locator("#recurring-table tr[data-recurring-id='nightly']")
        listed.locator("details.menu > summary").click()
        listed.locator("a.edit-link").click()
        page.wait_for_selector("#recurring-edit-form")
        assert page.input_value("#edit-args") == '["eu"]'
        assert page.input_value("#edit-kwargs") == '{"format": "csv"}'
        assert page.input_value("#edit-queue") == "reports"
        assert '"priority": 5' in page.inner_text("#edit-other-options")
        # Bad JSON: the form again, naming the field, what was typed kept; nothing written.
        for field, text, reason in (
            ("#edit-args", "[1,", "args is not JSON"),
            ("#edit-kwargs", "[1]", "kwargs must be a JSON object"),
        ):
            page.fill(field, text)
            page.fill("#edit-queue", "bulk")
            page.check("#edit-confirm")
            with page.expect_navigation():
                page.click("#edit-submit")
            assert reason in page.inner_text("#form-error")
            assert page.input_value(field) == text and page.input_value("#edit-queue") == "bulk"
            assert client.storage.get_recurring("nightly") == row
            page.fill(field, '["eu"]' if field == "#edit-args" else '{"format": "csv"}')
        # A good change: saved, with every field left as it was kept.
        page.fill("#edit-args", '[2, "us"]')
        page.check("#edit-confirm")
        with page.expect_navigation():
            page.click("#edit-submit")
        assert page.url.endswith("/recurring")
        assert "saved (args,queue changed)" in page.inner_text("#flashes")
        after = client.recurring.get("nightly")
        assert after is not None
        assert (after.args, after.kwargs) == ([2, "us"], {"format": "csv"})
        assert after.options == {"queue": "bulk", "priority": 5}
        assert after.schedule == before.schedule and after.task == before.task
    finally:
        page.context.close()


def _with_outcomes(client: Client) -> dict[str, str]:
    """The browser tier's data set, its recurring jobs fired by triggers with outcomes recorded
    as the workers' plugin would: nightly-report's newest firing failed, health-ping's has
    none yet (an older one succeeded). Their newest firings' job ids."""
    store = client.storage
    assert isinstance(store, OutcomeStore)
    fill(client, scheduled=6)
    older = client.recurring.trigger("health-ping")
    newest = {name: client.recurring.trigger(name) for name in ("nightly-report", "health-ping")}
    now, failing = store.now(), newest["nightly-report"]
    task = "reports.build_export"
    store.record_outcomes(
        [
            OutcomeEvent(older, "mail.send_welcome", OutcomeState.SUCCEEDED, now, "w1"),
            OutcomeEvent(failing, task, OutcomeState.RECEIVED, now, "w1"),
            OutcomeEvent(failing, task, OutcomeState.FAILED, now + 1, "w1", 0.2, "E: x"),
        ]
    )
    return newest


def _add_long_row(client: Client) -> None:
    """A recurring job with a 120-character id and an 80-character task, its newest firing
    retried."""
    store = client.storage
    assert isinstance(store, OutcomeStore)
    client.recurring.save(LONG_RECURRING, LONG_TASK, "*/5 * * * *", timezone="Asia/Kolkata")
    fired = client.recurring.trigger(LONG_RECURRING)
    store.record_outcomes([OutcomeEvent(fired, LONG_TASK, OutcomeState.RETRIED, store.now(), "w")])


_MEASURE = """() => {
  const box = document.querySelector('#recurring-table').parentElement;
  const rows = [...document.querySelectorAll('#recurring-table tr.recurring-row')];
  const line = parseFloat(getComputedStyle(rows[0].querySelector('td')).lineHeight);
  return {
    page: [document.documentElement.scrollWidth, window.innerWidth],
    box: [box.scrollWidth, box.clientWidth],
    rows: rows.map(r => r.getBoundingClientRect().height),
    line: line,
  };
}"""


def _one_line_rows(measured: dict[str, Any]) -> None:
    """Every row one line high: the same height, less than two lines of text."""
    heights = measured["rows"]
    assert max(heights) - min(heights) < 1, heights
    assert max(heights) < 2 * measured["line"], (heights, measured["line"])


def test_the_list_shows_the_last_outcome_on_one_line_and_fits_the_window(
    served: str, client: Client
) -> None:
    newest = _with_outcomes(client)
    in_chromium(lambda chromium: _list(chromium, served, client, newest))


def _list(chromium: Any, served: str, client: Client, newest: dict[str, str]) -> None:
    page = _page(chromium)
    try:
        page.goto(served + "/recurring")
        nightly = page.locator("#recurring-table tr[data-recurring-id='nightly-report']")
        badge = nightly.locator("td.recurring-last-outcome a.badge")
        assert badge.inner_text() == "failed"
        assert badge.evaluate("e => getComputedStyle(e).backgroundColor") == FAILED_RED
        assert badge.get_attribute("title") == newest["nightly-report"]
        ping = page.locator("#recurring-table tr[data-recurring-id='health-ping']")
        assert ping.locator("td.recurring-last-outcome").inner_text() == "-"  # none yet
        assert "succeeded" in ping.locator("td.col-firings").inner_text()  # the older one's
        # 1280x800, the ordinary data set: the table fits without scrolling its own box.
        measured = page.evaluate(_MEASURE)
        assert measured["page"][0] <= measured["page"][1], measured
        assert measured["box"][0] <= measured["box"][1], measured
        _one_line_rows(measured)
        with page.expect_navigation():
            badge.click()  # the badge opens the firing's own page, its timeline
        assert page.locator("#job-timeline").count() == 1
        assert "failed" in page.inner_text("#job-timeline")
    finally:
        page.context.close()
    # With 120-character ids and 80-character task names, at both sizes: one line per row, and
    # no page wider than the window (the table scrolls inside its own box where it must).
    _add_long_row(client)
    for size in SIZES:
        page = _page(chromium, size)
        try:
            page.goto(served + "/recurring")
            long_row = page.locator(f"#recurring-table tr[data-recurring-id='{LONG_RECURRING}']")
            assert long_row.locator("td.recurring-last-outcome").inner_text() == "retried"
            measured = page.evaluate(_MEASURE)
            assert measured["page"][0] <= measured["page"][1], (size, measured)
            assert len(measured["rows"]) == 3
            _one_line_rows(measured)
        finally:
            page.context.close()
