"""The Overview page and the Failed / expired / errors page."""

from __future__ import annotations

from typing import Any

from flask import Flask, render_template

from parallel_scheduler.dashboard.browse import JobFilter, fetch_page
from parallel_scheduler.dashboard.context import dashboard
from parallel_scheduler.dashboard.overview import overview
from parallel_scheduler.jobs import Job
from storage_adapters import JobState

__all__ = ["register"]

SECTION_ROWS = 50
#: Rows the errors section reads at most (errors are rare: the scan usually reads them all).
ERROR_SCAN_BOUND = 1_000


def overview_page() -> Any:
    return render_template("overview.html", o=overview(dashboard().client))


def errors_page() -> Any:
    """Failed jobs (set aside: they could not be sent after every attempt allowed) and expired
    jobs (both indexed by state), and scheduled jobs carrying a ``last_error`` (a release that
    failed and will be retried; read with the bounded scan of the Jobs page)."""
    client = dashboard().client
    failed = fetch_page(
        client.storage, JobFilter(state=JobState.FAILED), None, SECTION_ROWS, client.retry_for
    )
    expired = fetch_page(
        client.storage, JobFilter(state=JobState.EXPIRED), None, SECTION_ROWS, client.retry_for
    )
    failing = fetch_page(
        client.storage,
        JobFilter(state=JobState.SCHEDULED, has_error=True),
        None,
        SECTION_ROWS,
        client.retry_for,
        ERROR_SCAN_BOUND,
    )
    return render_template(
        "errors.html",
        failed=[Job.from_record(r) for r in failed.rows],
        failed_page=failed,
        expired=[Job.from_record(r) for r in expired.rows],
        expired_page=expired,
        failing=[Job.from_record(r) for r in failing.rows],
        failing_page=failing,
    )


def register(app: Flask) -> None:
    app.add_url_rule("/", "overview", overview_page)
    app.add_url_rule("/errors", "errors", errors_page)
