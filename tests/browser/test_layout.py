"""Every page fits its viewport: at 1280x800 (a laptop) and at 390x844 (a phone), over the data
set plus jobs with 120-character ids, 80-character task names and long errors, no page is wider
than the window (tables scroll inside their own box, long values end in an ellipsis with the
full value in ``title``). And every time shown follows the one rule: relative text, the absolute
time on hover, never a raw epoch or a microsecond."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest

from parallel_scheduler import Client
from parallel_scheduler.jobs import JobSpec
from storage_adapters import OutcomeEvent, OutcomeState, OutcomeStore
from tests.browser.data import DataSet

LONG_TASK = "reports." + "quarterly_revenue_reconciliation_" * 2 + "x" * 6  # 80 characters
LONG_ID = ("customer-" + "0123456789abcdef" * 8)[:120]
LONG_RECURRING = ("nightly-" + "a" * 120)[:120]
LONG_CALENDAR = ("holidays-" + "c" * 100)[:100]
LONG_ERROR = "OperationalError: " + "the broker refused the connection; " * 6
SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
#: A microsecond in a shown time, or a bare epoch (ten digits, a dot, digits).
RAW = re.compile(r"\d\d:\d\d:\d\d\.\d+|\b1\d{9}\.\d+\b")


def _long_rows(client: Client) -> None:
    assert len(LONG_TASK) == 80 and len(LONG_ID) == 120 and len(LONG_RECURRING) == 120
    now = client.storage.now()
    client.schedule_many(
        [
            JobSpec(
                LONG_TASK,
                args=["x" * 300],
                options={"queue": "q" * 60, "expires": now + 7200},
                id=f"{LONG_ID[:-1]}{n}",
                eta=now + 60 + n,
            )
            for n in range(3)
        ]
    )
    client.recurring.save(LONG_RECURRING, LONG_TASK, "*/5 * * * *", timezone="Asia/Kolkata")
    client.pause_task("paused." + LONG_TASK, note=LONG_ERROR, by="w" * 70)  # holds none of them
    client.limit_task("limited." + LONG_TASK, "1000000/s", burst=1_000_000, by="w" * 70)
    days = [f"2027-{month:02d}-{day:02d}" for month in range(1, 13) for day in (1, 15)]
    client.put_calendar(LONG_CALENDAR, days, "America/Argentina/Buenos_Aires", "w" * 70)
    client.recurring.save(  # listed beside its calendar: a long id that excludes it
        LONG_RECURRING[:-1] + "c", LONG_TASK, "0 9 * * *", exclude=[LONG_CALENDAR]
    )
    store = client.storage
    if isinstance(store, OutcomeStore):
        job = f"{LONG_ID[:-1]}0"
        store.record_outcomes(
            [
                OutcomeEvent(job, LONG_TASK, OutcomeState.RECEIVED, now - 5, "w" * 70),
                OutcomeEvent(
                    job, LONG_TASK, OutcomeState.FAILED, now - 4, "w" * 70, 0.25, LONG_ERROR
                ),
            ]
        )


def _pages(data: DataSet) -> list[str]:
    job = quote(f"{LONG_ID[:-1]}0", safe="")
    return [
        "/",
        "/jobs?state=any",
        f"/jobs?state=scheduled&task={quote(LONG_TASK)}",
        f"/jobs/detail?id={job}",
        f"/jobs/detail?id={data.errored[0]}",
        "/recurring",
        f"/recurring/edit?id={LONG_RECURRING}",
        "/recurring/new",
        "/jobs/new",
        "/errors",
        "/outcomes",
        "/pauses",
        "/calendars",
        f"/jobs/bulk-cancel?state=scheduled&task={quote(LONG_TASK)}",
    ]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s['width']}x{s['height']}")
def test_no_page_is_wider_than_the_window(
    browser: Any, dashboard: str, data: DataSet, client: Client, size: dict[str, int]
) -> None:
    _long_rows(client)
    context = browser.new_context(viewport=size, timezone_id="UTC")
    try:
        page = context.new_page()
        for path in _pages(data):
            response = page.goto(dashboard + path + ("&" if "?" in path else "?") + "tz=Asia/Tokyo")
            assert response is not None and response.status == 200, path
            widths = page.evaluate(
                "() => [document.documentElement.scrollWidth, window.innerWidth]"
            )
            assert widths[0] <= widths[1], (path, size, widths)
            shown = page.inner_text("main")
            assert not RAW.search(shown), (path, RAW.search(shown))
    finally:
        context.close()


def test_times_are_relative_with_the_absolute_time_on_hover(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    _long_rows(client)
    page.goto(dashboard + f"/jobs/detail?id={quote(LONG_ID[:-1] + '0', safe='')}&tz=Asia/Tokyo")
    due = page.locator("#job-due time.when")
    assert re.fullmatch(r"in 1 min|in 59 s|in 58 s", due.inner_text()), due.inner_text()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+09:00", due.get_attribute("title"))
    assert due.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
    expires = page.locator("#job-expires time.when")
    assert expires.inner_text() == "in 2 h" or expires.inner_text() == "in 1 h"
    assert '"expires": "' in page.inner_text("#job-options")  # a time, not a float
    page.goto(dashboard + f"/jobs?state=scheduled&task={quote(LONG_TASK)}")
    link = page.locator("#jobs-table a.job-link").first
    assert link.get_attribute("title") == link.inner_text() == f"{LONG_ID[:-1]}0"
    assert link.evaluate("e => e.scrollWidth > e.clientWidth")  # cut with an ellipsis
    assert page.locator("#jobs-table td.job-state .badge-scheduled").count() == 3
    assert page.inner_text("#zone-form label") == "Times in"
