"""The dashboard's one script (static/live.js), in a real browser under the real CSP: the
browser's own time zone is the default and is remembered, and the Overview's counts, chart,
instances and health banner refresh by themselves until paused."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from parallel_scheduler import Client
from tests.browser.conftest import STEP_TIMEOUT_MS, VIEWPORT
from tests.browser.data import DataSet

#: The Overview refreshes every 5 s: wait for one refresh, with room to spare.
REFRESH_MS = 12_000


def test_the_browsers_time_zone_is_the_default_and_is_remembered(
    browser: Any, dashboard: str, data: DataSet
) -> None:
    context = browser.new_context(viewport=VIEWPORT, timezone_id="Asia/Tokyo")
    context.set_default_timeout(STEP_TIMEOUT_MS)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))  # a script error
        page.on("console", lambda m: errors.append(m.text) if "Security Policy" in m.text else None)
        page.goto(dashboard + f"/jobs/detail?id={data.scheduled[0]}")
        page.wait_for_url("**tz=Asia%2FTokyo**")
        assert page.locator("#zone-select").input_value() == "Asia/Tokyo"
        assert page.locator("#job-due time.when").get_attribute("title").endswith("+09:00")
        page.goto(dashboard + "/jobs")  # no ?tz: the session remembers it, no second trip
        assert page.locator("body").get_attribute("data-zone-chosen") == "yes"
        assert "tz=" not in page.url and page.locator("#zone-select").input_value() == "Asia/Tokyo"
        page.select_option("#zone-select", "UTC")  # a choice of the viewer's own wins
        page.click("#zone-submit")
        page.wait_for_url("**tz=UTC**")
        page.goto(dashboard + "/jobs")
        assert page.locator("#zone-select").input_value() == "UTC"
    finally:
        context.close()
    assert errors == []  # nothing refused by the CSP, no script error


def test_the_overview_refreshes_itself_until_paused(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if r.resource_type == "fetch" else None)
    page.goto(dashboard + "/")
    toggle = page.locator("#live-toggle")
    expect(toggle).to_be_visible()
    assert toggle.get_attribute("aria-pressed") == "false"
    scheduled = len(data.scheduled) + len(data.errored)
    assert page.inner_text("#count-scheduled td.num") == str(scheduled)
    # Given a job scheduled behind the page's back, Then the count follows without a reload
    client.schedule("t.live", countdown=600, job_id="live-1")
    expect(page.locator("#count-scheduled td.num")).to_have_text(
        str(scheduled + 1), timeout=REFRESH_MS
    )
    expect(page.locator("#live-status")).to_contain_text("updated")
    assert fetched and all(url.rstrip("/") == dashboard for url in fetched)
    # When paused (remembered across pages), Then nothing is fetched and the count stays
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    before = len(fetched)
    client.schedule("t.live", countdown=600, job_id="live-2")
    page.wait_for_timeout(6_500)
    assert len(fetched) == before
    assert page.inner_text("#count-scheduled td.num") == str(scheduled + 1)
    page.reload()
    assert page.locator("#live-toggle").get_attribute("aria-pressed") == "true"
    assert page.inner_text("#count-scheduled td.num") == str(scheduled + 2)
    page.locator("#live-toggle").click()  # resumed: refreshes at once
    expect(page.locator("#live-status")).to_contain_text("updated", timeout=REFRESH_MS)
