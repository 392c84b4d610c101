"""Every page opens in a real browser and shows what the store holds; the Jobs page filters by
state and task and pages through them with its keyset links; job arguments are shown as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect

from parallel_scheduler import Client
from tests.browser.data import INSTANCE_ID, SCRIPT_ARG, SCRIPT_JOB, DataSet
from tests.browser.steps import follow


def _row_ids(page: Any, table: str = "#jobs-table") -> list[str]:
    return [
        str(i)
        for i in page.locator(f"{table} tr.job-row").evaluate_all(
            "rows => rows.map(r => r.dataset.jobId)"
        )
    ]


def test_overview_shows_counts_instances_and_the_release_chart(
    page: Any, dashboard: str, data: DataSet, client: Client, shot: Callable[[str], Path]
) -> None:
    response = page.goto(dashboard + "/")
    assert response is not None and response.status == 200
    assert page.title().startswith("Overview")
    for state, count in client.counts().items():
        assert page.inner_text(f"#count-{state} td.num") == str(count), state
    assert page.inner_text("#count-scheduled td.num") == str(len(data.scheduled) + 1)
    assert page.inner_text("#due-now") == str(len(data.errored))  # given back, due since
    assert page.inner_text("#recurring-count") == str(len(data.recurring))
    assert page.inner_text("#released-total") == str(len(data.enqueued))
    instance = page.locator(f"#instances tr[data-instance-id='{INSTANCE_ID}']")
    assert instance.locator(".instance-state").inner_text() == "alive"
    assert instance.locator(".instance-locks").inner_text() == "delayed-scheduler"
    assert page.inner_text("#lock-holders").startswith(f"Delayed lock: {INSTANCE_ID} ")
    released = page.locator("#release-chart g.bar").evaluate_all(
        "bars => bars.map(b => Number(b.dataset.count))"
    )
    assert sum(released) == len(data.enqueued)
    assert shot("overview").stat().st_size > 10_000


def test_the_nav_reaches_every_page(page: Any, dashboard: str, data: DataSet) -> None:
    page.goto(dashboard + "/")
    for link, title in (
        ("#nav-jobs", "Jobs"),
        ("#nav-recurring", "Recurring jobs"),
        ("#nav-errors", "Expired / errors"),
        ("#nav-overview", "Overview"),
    ):
        follow(page, link)
        expect(page).to_have_title(f"{title} · parallel-scheduler")
        assert page.locator("h1").count() == 1


def test_jobs_filter_by_state_task_and_due_time_and_page_through_with_keyset_links(
    page: Any, dashboard: str, data: DataSet, client: Client, shot: Callable[[str], Path]
) -> None:
    page.goto(dashboard + "/jobs?limit=7")
    # The default view: scheduled jobs, earliest due first (the errored one fell due earlier).
    assert _row_ids(page)[:2] == [*data.errored, data.scheduled[0]]
    shot("jobs")
    page.select_option("#filter-state", "scheduled")
    task = "mail.send_welcome"
    page.fill("#filter-task", task)
    follow(page, "#filter-submit")
    assert _row_ids(page) == data.by_task[task]  # one page of 50 holds them all
    page.goto(page.url + "&limit=4")  # small pages (the form has no page-size field)
    seen: list[str] = []
    cursors: list[str] = []
    for _ in range(10):
        seen.extend(_row_ids(page))
        rows = page.locator("#jobs-table tr.job-row")
        for n in range(rows.count()):
            assert rows.nth(n).locator("td").nth(1).inner_text() == task
            assert rows.nth(n).locator(".job-state").inner_text() == "scheduled"
        following = page.locator("#next-page")
        if following.count() == 0:
            break
        query = parse_qs(urlparse(following.get_attribute("href")).query)
        assert query["task"] == [task] and query["state"] == ["scheduled"], query
        cursors.extend(query["after"])
        follow(page, following)
        assert page.locator("#first-page").count() == 1
    assert seen == data.by_task[task]  # every id once, in (due_at, id) order
    assert len(cursors) == len(set(cursors)) == (len(seen) - 1) // 4
    page.select_option("#filter-state", "enqueued")
    page.fill("#filter-task", "")
    follow(page, "#filter-submit")
    assert sorted(_row_ids(page)) == sorted(data.enqueued)
    page.select_option("#filter-state", "expired")
    follow(page, "#filter-submit")
    assert sorted(_row_ids(page)) == sorted(data.expired)
    # A due-time range (inclusive, read in the viewer's zone: UTC here) over the scheduled jobs.
    first, last = (client.get(job_id) for job_id in (data.scheduled[3], data.scheduled[6]))
    assert first is not None and last is not None
    page.select_option("#filter-state", "scheduled")
    page.fill("#filter-due-from", first.due_at.strftime("%Y-%m-%dT%H:%M:%S"))
    page.fill("#filter-due-to", last.due_at.strftime("%Y-%m-%dT%H:%M:%S"))
    follow(page, "#filter-submit")
    assert _row_ids(page) == data.scheduled[3:7]


def test_job_detail_shows_the_job_and_its_script_argument_as_text(
    page: Any, dashboard: str, data: DataSet, shot: Callable[[str], Path]
) -> None:
    page.goto(dashboard + "/jobs?task=mail.send_welcome&limit=500")
    follow(page, f"#jobs-table tr[data-job-id='{SCRIPT_JOB}'] a.job-link")
    assert page.inner_text("#job-id") == SCRIPT_JOB
    detail_url = page.url
    page.goto(dashboard + "/jobs")
    page.fill("#search-id", SCRIPT_JOB)  # the search by id leads to the same page
    follow(page, "#search-submit")
    assert page.url == detail_url
    assert page.inner_text("#job-task") == "mail.send_welcome"
    assert page.inner_text("#job-state") == "scheduled"
    assert SCRIPT_ARG in page.inner_text("#job-args")
    assert SCRIPT_ARG in page.inner_text("#job-kwargs")
    # Escaped: the tag is text in the page, never an element (the CSP would also stop it
    # running, so the DOM itself is checked, not only the absence of a dialog).
    assert page.locator("script:not([src])").count() == 0  # only the app's own live.js
    assert page.locator("script[src]").count() == 1
    assert "&lt;script&gt;" in page.content()
    assert page.inner_text("#job-celery-id") == SCRIPT_JOB
    assert "UTC" in page.inner_text("#job-due-utc") or page.inner_text("#job-due-utc")
    shot("job")
    page.goto(dashboard + f"/jobs/detail?id={data.errored[0]}")
    assert "broker unreachable" in page.inner_text("#job-last-error")
    assert page.inner_text("#job-attempts") == "1"


def test_recurring_page_lists_schedules(page: Any, dashboard: str, data: DataSet) -> None:
    page.goto(dashboard + "/recurring")
    ids = page.locator("#recurring-table tr.recurring-row").evaluate_all(
        "rows => rows.map(r => r.dataset.recurringId)"
    )
    assert sorted(ids) == sorted(data.recurring)
    nightly = page.locator("#recurring-table tr[data-recurring-id='nightly-report']")
    assert "30 2 * * *" in nightly.locator(".recurring-schedule").inner_text()
    assert "Europe/Paris" in nightly.inner_text()
    assert nightly.locator(".recurring-paused").inner_text() == "no"


def test_errors_page_lists_expired_and_failing_jobs(
    page: Any, dashboard: str, data: DataSet
) -> None:
    page.goto(dashboard + "/errors")
    assert sorted(_row_ids(page, "#expired-table")) == sorted(data.expired)
    assert _row_ids(page, "#failing-table") == data.errored
    assert "broker unreachable" in page.inner_text("#failing-table")
