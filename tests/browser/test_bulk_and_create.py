"""In a real browser: the tick boxes in the Jobs table belong to the bulk form under it (the
``form`` attribute: no nested forms, no script), a recurring job is previewed, then created,
from the New recurring job page, and a unique job is scheduled, then kept, from the Schedule a
job page."""

from __future__ import annotations

from typing import Any

from parallel_scheduler import Client
from tests.browser.data import DataSet
from tests.browser.steps import follow


def test_move_the_ticked_jobs_by_an_offset(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    ticked, untouched = data.scheduled[:2], data.scheduled[2]
    before = {job_id: client.get(job_id) for job_id in (*ticked, untouched)}
    page.goto(dashboard + "/jobs")
    page.check("#pick-all")  # the script's one box for the whole page
    assert page.locator("input.pick:not(:checked)").count() == 0
    page.uncheck("#pick-all")
    assert page.locator("input.pick:checked").count() == 0
    for job_id in ticked:
        page.locator(f"#jobs-table tr[data-job-id='{job_id}'] input.pick").check()
    page.select_option("#bulk-action", "shift")
    page.fill("#bulk-offset", "-120")
    page.check("#bulk-selected-confirm")
    follow(page, "#bulk-selected-submit")
    assert "2 of 2 selected jobs moved" in page.inner_text("#flashes")
    for job_id, was in before.items():
        now = client.get(job_id)
        assert was is not None and now is not None
        moved = (now.due_at - was.due_at).total_seconds()
        assert moved == (-120 if job_id in ticked else 0), job_id


def test_create_a_recurring_job_after_previewing_it(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    page.goto(dashboard + "/recurring")
    follow(page, "#new-recurring")
    page.fill("#new-id", "weekly-digest")
    page.fill("#new-task", "mail.send_digest")
    page.fill("#new-kwargs", '{"audience": "all"}')
    page.fill("#new-cron", "0 9 * * 1")
    page.select_option("#new-timezone", "America/New_York")
    follow(page, "#new-preview")
    assert "America/New_York" in page.inner_text("#schedule-words")
    runs = page.locator("#next-runs li .absolute").all_inner_texts()
    assert len(runs) == 5 and all(run.endswith(" 09:00:00") for run in runs)
    assert client.recurring.get("weekly-digest") is None  # a preview saves nothing
    page.check("#new-confirm")
    follow(page, "#new-submit")
    assert "weekly-digest created" in page.inner_text("#flashes")
    saved = client.recurring.get("weekly-digest")
    assert saved is not None and saved.kwargs == {"audience": "all"}
    assert (saved.schedule.cron, saved.schedule.timezone) == ("0 9 * * 1", "America/New_York")
    assert page.locator("#recurring-table tr[data-recurring-id='weekly-digest']").count() == 1


def test_schedule_a_unique_job_then_keep_it(
    page: Any, dashboard: str, data: DataSet, client: Client
) -> None:
    page.goto(dashboard + "/jobs")
    follow(page, "#new-job")
    for _ in range(2):
        page.fill("#new-task", "billing.remind")
        page.fill("#new-args", "[42]")
        page.fill("#new-countdown", "3600")
        page.fill("#new-unique-key", "invoice-42")
        page.check("#new-confirm")
        follow(page, "#new-submit")
    assert "kept (unchanged)" in page.inner_text("#schedule-result")
    follow(page, "#result-job")
    assert "invoice-42" in page.inner_text("#job-unique-key")
    held = [job for job in client.list(limit=500) if job.unique_key == "invoice-42"]
    assert len(held) == 1 and held[0].args == [42]
