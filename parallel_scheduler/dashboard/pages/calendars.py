"""The Calendars page: every calendar of excluded dates (name, time zone, its dates and ranges,
who set it and when) with the recurring jobs that exclude it, a form to add or replace one, and
a Remove button per calendar. All are POSTs with the CSRF token (checked in ``app``) and a ticked
confirmation box, and leave one audit line, as on the Pauses page.

The form's dates and ranges are read by ``calendars.py`` (``date_words``, ``parse_dates``; an
uploaded ``.ics`` file by ``ics_ranges``) and go to ``Client.put_calendar`` as typed, so
storage's checks (``checks/calendars.py``) refuse a bad name, zone or date in the same words as
the command line and the API; the page is then shown again with the reason and what was typed,
and nothing is written. Which jobs exclude a calendar is read from one page of recurring jobs
(``JOBS_READ``), so the page costs two storage reads however many jobs there are.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from flask import Flask, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from parallel_scheduler.calendars import (
    calendar_summary,
    calendar_view,
    date_words,
    ics_ranges,
    parse_dates,
    removed_text,
)
from parallel_scheduler.dashboard.context import audit, dashboard
from parallel_scheduler.dashboard.forms import require_confirmation
from parallel_scheduler.dashboard.inputs import BadInput
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.recurring.excluding import jobs_naming
from storage_adapters import InvalidArgumentError
from storage_adapters.checks.calendars import check_calendar_name
from storage_adapters.checks.pauses import MAX_PAUSED_BY_LENGTH

__all__ = ["register"]

#: The recurring jobs read to tell which exclude each calendar: one storage read, bounded.
JOBS_READ = 1000
#: Ranges and job ids shown in a row before the rest folds under "and N more".
SHOWN = 12


def _excluded_by() -> tuple[dict[str, list[str]], bool]:
    """The ids of the recurring jobs naming each calendar in their ``exclude`` (among the
    first ``JOBS_READ``), and whether there were more jobs than were read."""
    rows = dashboard().client.recurring.list(limit=JOBS_READ + 1)
    naming: dict[str, list[str]] = {}
    for row in rows[:JOBS_READ]:
        exclude = row.schedule.exclude
        if not isinstance(exclude, (list, tuple)):  # a row written by hand: shown elsewhere
            continue
        for name in exclude:
            if isinstance(name, str):
                naming.setdefault(name, []).append(row.id)
    return naming, len(rows) > JOBS_READ


def _page(form: Mapping[str, str] | None = None, error: str | None = None) -> str:
    naming, more_jobs = _excluded_by()
    return render_template(
        "calendars.html",
        calendars=[calendar_view(record) for record in dashboard().client.calendars()],
        naming=naming,
        more_jobs=more_jobs,
        jobs_read=JOBS_READ,
        shown=SHOWN,
        form=form,
        error=error,
    )


def _viewer() -> str | None:
    """Who sets a calendar: the dashboard's viewer (``user@address``), cut to storage's bound."""
    return str(g.get("who") or "")[:MAX_PAUSED_BY_LENGTH] or None


def calendars() -> Any:
    """The page: every calendar, the jobs excluding each, and (unless read-only) the forms."""
    return _page()


def _uploaded(name: str, zone: str) -> list[tuple[str, str]]:
    """The ranges of the uploaded ``.ics`` file, if one was chosen (none: no ranges)."""
    upload = request.files.get("ics")
    if upload is None or not upload.filename:
        return []
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"cannot import {upload.filename!r}: it is not UTF-8 text") from None
    return ics_ranges(name, text, zone)


def save() -> Any:
    """Add or replace a calendar from the form; a refusal shows the form again, writing nothing."""
    form = request.form
    name, zone = form.get("name", ""), form.get("timezone", "")
    try:
        require_confirmation(form)
        typed = parse_dates(
            date_words([form.get("dates", "")]), date_words([form.get("ranges", "")])
        )
        ranges = typed + _uploaded(name, zone)
        stored = dashboard().client.put_calendar(name, ranges, zone, _viewer())
    except (InvalidArgumentError, BadInput) as exc:
        return _page(form, str(exc)), 400
    view = calendar_view(stored)
    audit("put_calendar", [stored.name], f"ranges={len(stored.ranges)} timezone={stored.timezone}")
    flash(f"calendar {stored.name!r} saved: {calendar_summary(view)}")
    return redirect(url_for("calendars"), 303)


def remove() -> Response:
    """Delete a calendar, saying how many recurring jobs still name it (they fire as if empty)."""
    form = request.form
    require_confirmation(form)
    name = check_calendar_name(form.get("name", ""))
    client = dashboard().client
    naming = call_storage(
        partial(jobs_naming, client.storage, name), give_up_after=client.retry_for
    )
    removed = client.remove_calendar(name)
    audit("remove_calendar", [name], f"removed={removed}")
    flash(removed_text(name, removed, naming))
    return redirect(url_for("calendars"), 303)


def register(app: Flask) -> None:
    app.add_url_rule("/calendars", "calendars", calendars)
    app.add_url_rule("/calendars/save", "calendars_save", save, methods=["POST"])
    app.add_url_rule("/calendars/remove", "calendars_remove", remove, methods=["POST"])
