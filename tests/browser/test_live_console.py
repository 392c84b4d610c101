"""The operations console in the browser tier's headless Chromium (Debian's, through
Playwright's ``executable_path``; nothing downloaded; one per session, conftest.py), against the
dashboard served over HTTP on SQLite:

- the health banner appears without a reload on the Jobs page (which refreshes its list) and on
  a page that refreshes only the banner, once every scheduler has died;
- the Jobs page's match count and rows follow the store, but wait while jobs are ticked, and
  the pause is one choice for every page;
- a zone list's filter box narrows its options, and the narrowed choice is what is submitted;
- no page is wider than the window with the new controls, at 1280x800 and at 390x844.

Every wait is a condition with a deadline (Playwright's ``expect``), never a sleep."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.dashboard.inputs import zone_groups, zone_names
from storage_adapters import InstanceRecord, Storage
from tests.browser.conftest import STEP_TIMEOUT_MS, VIEWPORT, Served
from tests.conftest import SLOW_MACHINE_FACTOR

pytestmark = pytest.mark.timeout(180)

#: A refresh every 5 s, the health judged at most every 5 s: news shows within ~10 s.
DEADLINE_MS = int(30_000 * SLOW_MACHINE_FACTOR)
SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
OPTIONS = "el => Array.from(el.options).map(o => o.value)"
GROUPS = "el => Array.from(el.querySelectorAll('optgroup')).map(g => g.label)"


class Console:
    """A browser context over the served dashboard that fails the test on a script error, a
    refusal by the Content-Security-Policy or a JavaScript dialog."""

    def __init__(self, browser: Any, url: str) -> None:
        self.url = url
        self.problems: list[str] = []
        self.context = browser.new_context(viewport=VIEWPORT, timezone_id="UTC")
        self.context.set_default_timeout(STEP_TIMEOUT_MS)

    def open(self, path: str) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda exc: self.problems.append(f"script error: {exc}"))
        page.on(
            "console",
            lambda m: self.problems.append(m.text) if "Security Policy" in m.text else None,
        )
        page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        response = page.goto(self.url + path)
        assert response is not None and response.status == 200, path
        return page


@pytest.fixture
def console(browser: Any, client: Client) -> Iterator[Callable[..., Console]]:
    servers: list[Served] = []
    made: list[Console] = []

    def start(**options: Any) -> Console:
        served = Served(create_app(client, **options))
        servers.append(served)
        made.append(Console(browser, served.url))
        return made[-1]

    yield start
    for one in made:
        one.context.close()
    for served in servers:
        served.stop()
    assert [p for one in made for p in one.problems] == []


class Scheduler:
    """A scheduler's liveness record kept fresh every 0.1 s (its own heartbeat interval: 0.2 s,
    so it is shown dead 0.6 s after its last beat), until it dies (``die``: no goodbye)."""

    def __init__(self, storage: Storage, instance_id: str) -> None:
        self.storage = storage
        self.instance_id = instance_id
        self.details = json.dumps({"settings": {"heartbeat_interval": 0.2}})
        storage.register_instance(
            InstanceRecord(instance_id, "host-s", 4242, "0.0", time.time(), 0.0, self.details)
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(0.1):
            self.storage.heartbeat_instance(self.instance_id, self.details)

    def die(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_the_banner_appears_without_a_reload_when_every_scheduler_dies(
    console: Callable[..., Console], client: Client
) -> None:
    # Given jobs due and two live schedulers: healthy
    now = client.storage.now()
    for n in range(3):
        client.schedule("t.due", eta=now - 2 + n * 0.1, job_id=f"due-{n}")
    schedulers = [Scheduler(client.storage, f"sched-{n}") for n in range(2)]
    board = console()
    jobs = board.open("/jobs")
    other = board.open("/recurring")  # refreshes only the banner, from /live/health
    fetched: list[str] = []
    other.on("request", lambda r: fetched.append(r.url) if r.resource_type == "fetch" else None)
    for page in (jobs, other):
        assert page.locator("#health-banner").count() == 0
        page.evaluate("() => { window.loadedOnce = true; }")
        expect(page.locator("#live-toggle")).to_be_visible()
    # When every scheduler dies (no goodbye: their records age)
    for scheduler in schedulers:
        scheduler.die()
    # Then the red banner appears on both pages, without a reload
    for page in (jobs, other):
        banner = page.locator("#health-banner")
        expect(banner).to_be_visible(timeout=DEADLINE_MS)
        expect(banner).to_contain_text("no live scheduler while jobs are due")
        expect(banner).to_contain_text("2 dead instance(s) on record")
        assert page.evaluate("() => window.loadedOnce === true")  # the same document
        assert banner.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(164, 14, 38)"
    assert fetched and all(url == board.url + "/live/health" for url in fetched), fetched
    assert "no live scheduler" not in other.inner_text("main")  # the banner's slot only


def test_the_jobs_list_follows_the_store_but_waits_while_jobs_are_ticked(
    console: Callable[..., Console], client: Client
) -> None:
    for n in range(3):
        client.schedule("mail.send", countdown=600 + n, job_id=f"mail-{n}")
    board = console()
    page = board.open("/jobs?task_prefix=mail.")
    rows = page.locator("#jobs-table tr.job-row")
    count = page.locator("#match-count")
    expect(count).to_have_text("3 jobs match.")
    page.evaluate("() => { window.loadedOnce = true; }")
    # Given a job scheduled behind the page's back, Then the count and the rows follow
    client.schedule("mail.send", countdown=700, job_id="mail-new")
    expect(count).to_have_text("4 jobs match.", timeout=DEADLINE_MS)
    expect(page.locator("tr.job-row[data-job-id='mail-new']")).to_have_count(1)
    client.schedule("report.build", countdown=700, job_id="not-mail")  # filtered out
    # When a job is ticked for a bulk action, Then the list waits (the banner does not)
    page.locator("tr.job-row[data-job-id='mail-1'] input.pick").check()
    client.schedule("mail.send", countdown=800, job_id="mail-while-ticked")
    status = page.locator("#live-status")
    expect(status).to_contain_text("the rest waits: jobs are ticked", timeout=DEADLINE_MS)
    expect(count).to_have_text("4 jobs match.")
    assert rows.count() == 4
    assert page.locator("tr.job-row[data-job-id='mail-1'] input.pick").is_checked()
    # When typing in the search form (nothing ticked), Then it waits too
    page.locator("tr.job-row[data-job-id='mail-1'] input.pick").uncheck()
    page.locator("#filter-error-contains").click()
    page.keyboard.type("Time")
    expect(status).to_contain_text("the rest waits: a form field is in use", timeout=DEADLINE_MS)
    assert rows.count() == 4
    # When the person moves on, Then the list catches up, and it is still the same document
    page.locator("#filter-error-contains").fill("")
    page.locator("h1").click()
    expect(count).to_have_text("5 jobs match.", timeout=DEADLINE_MS)
    expect(page.locator("tr.job-row[data-job-id='mail-while-ticked']")).to_have_count(1)
    assert page.locator("tr.job-row[data-job-id='not-mail']").count() == 0
    assert page.evaluate("() => window.loadedOnce === true")
    # And the box that ticks every job works on the refreshed rows
    page.locator("#pick-all").check()
    assert page.locator("input.pick:checked").count() == 5
    page.locator("#pick-all").uncheck()
    # The pause is one choice for every page, remembered
    page.locator("#live-toggle").click()
    assert page.locator("#live-toggle").get_attribute("aria-pressed") == "true"
    elsewhere = board.open("/errors")
    expect(elsewhere.locator("#live-toggle")).to_have_attribute("aria-pressed", "true")
    expect(elsewhere.locator("#live-toggle")).to_have_text("Resume live updates")
    elsewhere.locator("#live-toggle").click()
    expect(elsewhere.locator("#live-status")).to_contain_text("updated", timeout=DEADLINE_MS)


def test_a_zone_filter_box_narrows_the_options(
    console: Callable[..., Console], client: Client
) -> None:
    client.schedule("t.a", countdown=600, job_id="z-1")
    board = console()
    page = board.open("/jobs")
    select = page.locator("#zone-select")
    box = page.locator("#zone-select-filter")
    expect(box).to_be_visible()
    assert box.get_attribute("aria-label", timeout=STEP_TIMEOUT_MS).startswith("Filter the time")
    everything = select.evaluate(OPTIONS)
    assert everything == [*zone_names()[:1], *(n for _, names in zone_groups() for n in names)]
    assert select.evaluate(GROUPS) == [region for region, _ in zone_groups()]
    box.fill("tokyo")
    assert select.evaluate(OPTIONS) == ["Asia/Tokyo"] and select.evaluate(GROUPS) == ["Asia"]
    assert select.input_value() == "Asia/Tokyo"  # the first match is the one chosen
    box.fill("new york")
    assert select.evaluate(OPTIONS) == ["America/New_York"]
    box.fill("Europe/")
    europe = dict(zone_groups())["Europe"]
    assert select.evaluate(OPTIONS) == list(europe) and select.evaluate(GROUPS) == ["Europe"]
    box.fill("utc")
    assert "UTC" in select.evaluate(OPTIONS) and "Etc/UTC" in select.evaluate(OPTIONS)
    box.fill("no-such-zone")  # nothing matches: the zone chosen stays, alone
    assert select.evaluate(OPTIONS) == [select.input_value()]
    assert box.get_attribute("aria-invalid") == "true"
    box.fill("")
    assert select.evaluate(OPTIONS) == everything
    assert select.evaluate(GROUPS) == [region for region, _ in zone_groups()]
    # The narrowed choice is what the form sends
    box.fill("kolkata")
    with page.expect_navigation():
        page.locator("#zone-submit").click()
    assert "tz=Asia%2FKolkata" in page.url
    assert page.locator("#zone-select").input_value() == "Asia/Kolkata"
    # The new recurring job's zone list has its own box
    new = board.open("/recurring/new")
    new.locator("#new-timezone-filter").fill("paris")
    assert new.locator("#new-timezone").evaluate(OPTIONS) == ["Europe/Paris"]
    assert new.locator("#new-timezone").input_value() == "Europe/Paris"
    # and so has the reschedule form's
    detail = board.open("/jobs/detail?id=z-1")
    detail.locator("#reschedule-tz-filter").fill("auckland")
    assert detail.locator("#reschedule-tz").evaluate(OPTIONS) == ["Pacific/Auckland"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s['width']}x{s['height']}")
def test_no_page_is_wider_than_the_window_with_the_new_controls(
    browser: Any, client: Client, size: dict[str, int]
) -> None:
    now = client.storage.now()
    client.schedule("mail." + "x" * 70, eta=now - 5, job_id="wide-" + "9" * 100)  # due: banner
    served = Served(create_app(client))
    context = browser.new_context(viewport=size, timezone_id="UTC")
    context.set_default_timeout(STEP_TIMEOUT_MS)
    try:
        page = context.new_page()
        for path in (
            "/jobs?state=any&id_prefix=wide-&task_prefix=mail.&error_contains=refused&queue=q",
            "/jobs?state=any",
            "/recurring/new",
            "/jobs/detail?id=wide-" + "9" * 100,
            "/",
            "/recurring",
        ):
            response = page.goto(served.url + path)
            assert response is not None and response.status == 200, path
            expect(page.locator("#health-banner")).to_be_visible()
            expect(page.locator("#zone-select-filter")).to_be_visible()
            expect(page.locator("#live-status")).to_contain_text("live every 5 s")
            widths = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
            assert widths[0] <= widths[1], (path, size, widths)
    finally:
        context.close()
        served.stop()
