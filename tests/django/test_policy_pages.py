"""The policy forms under the Django mount (issue 25, §5): the Calendars page (a view-only user
sees no form and is refused; ``change_jobs``, as for pauses, saves a calendar from typed dates
and an uploaded ``.ics`` file with Django's CSRF token, and removes it; the admin log names the
calendar), a rate limit set through the Pauses page, and a recurring job's ``max_runs`` and
``overlap`` saved through its edit form (``change_recurring``; a refused value writes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parallel_scheduler import Client
from tests.django.test_pages import browser, form_token, job_id, log_entries, make_user, store, text

__all__ = ["make_user", "store"]  # the fixtures, used by name

ICS = (
    b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n"
    b"DTEND;VALUE=DATE:20261227\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def test_calendars_need_the_job_permission_and_django_csrf(
    store: Client, make_user: Callable[..., Any]
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    name = f"cal-{job_id()}"
    form = {"name": name, "timezone": "Europe/Berlin", "dates": "2026-05-01 2026-10-03",
            "ranges": "2026-08-01..2026-08-02", "confirm": "yes"}  # fmt: skip
    # A view-only user sees the page without its forms, and is refused a save
    viewer = browser(make_user("view_scheduler"))
    page = viewer.get("/scheduler/calendars")
    assert page.status_code == 200 and 'method="post"' not in text(page)
    assert 'id="nav-calendars" href="/scheduler/calendars"' in text(page)
    token = viewer.cookies["csrftoken"].value
    refused = viewer.post("/scheduler/calendars/save", {**form, "csrfmiddlewaretoken": token})
    assert refused.status_code == 403 and "permission" in text(refused)
    # so is a user who may change recurring jobs only: calendars are changed as pauses are
    recurring_only = browser(make_user("change_recurring"))
    page = recurring_only.get("/scheduler/calendars")
    assert page.status_code == 200 and 'id="calendar-form"' not in text(page)
    token = recurring_only.cookies["csrftoken"].value
    refused = recurring_only.post(
        "/scheduler/calendars/save", {**form, "csrfmiddlewaretoken": token}
    )
    assert refused.status_code == 403 and store.calendar(name) is None
    # An operator saves it with Django's token and an .ics file, then removes it
    operator = make_user("change_jobs")
    web = browser(operator)
    token = form_token(web, "/scheduler/calendars")
    assert web.post("/scheduler/calendars/save", form).status_code == 403  # no token
    upload = SimpleUploadedFile("xmas.ics", ICS, "text/calendar")
    done = web.post(
        "/scheduler/calendars/save", {**form, "ics": upload, "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 303, text(done)
    assert done["Location"] == "/scheduler/calendars"
    saved = store.calendar(name)
    assert saved is not None and saved.timezone == "Europe/Berlin"
    assert saved.ranges == (
        ("2026-05-01", "2026-05-01"),
        ("2026-08-01", "2026-08-02"),
        ("2026-10-03", "2026-10-03"),
        ("2026-12-25", "2026-12-26"),
    )
    assert saved.set_by.startswith(f"{operator.username}@")
    rid = f"r-{job_id()}"
    store.recurring.save(rid, "t.nightly", "30 2 * * *", exclude=[name])
    shown = text(web.get("/scheduler/calendars"))
    assert f"calendar &#39;{name}&#39; saved: 4 range(s), 6 day(s) in Europe/Berlin" in shown
    assert f'href="/scheduler/recurring/edit?id={rid}"' in shown
    bad = web.post(
        "/scheduler/calendars/save",
        {**form, "timezone": "Nowhere/City", "csrfmiddlewaretoken": token},
    )
    assert bad.status_code == 400 and "calendar time zone must be an IANA zone" in text(bad)
    gone = web.post(
        "/scheduler/calendars/remove",
        {"name": name, "confirm": "yes", "csrfmiddlewaretoken": token},
    )
    assert gone.status_code == 303 and store.calendar(name) is None
    assert "1 recurring job(s) still name it" in text(web.get("/scheduler/calendars"))
    assert [entry.object_repr for entry in log_entries(operator)] == [
        f"put_calendar calendar {name}",
        f"remove_calendar calendar {name}",
    ]
    store.recurring.remove(rid)


def test_a_rate_limit_through_the_pauses_page(store: Client, make_user: Callable[..., Any]) -> None:
    queue = f"q-{job_id()}"
    form = {"kind": "queue", "name": queue, "rate": "10/s", "burst": "5", "confirm": "yes"}
    viewer = browser(make_user("view_scheduler"))
    page = viewer.get("/scheduler/pauses")
    assert page.status_code == 200 and 'id="limit-form"' not in text(page)
    token = viewer.cookies["csrftoken"].value
    refused = viewer.post("/scheduler/pauses/limit", {**form, "csrfmiddlewaretoken": token})
    assert refused.status_code == 403
    assert all(limit.name != queue for limit in store.rate_limits())
    operator = make_user("change_jobs")
    web = browser(operator)
    token = form_token(web, "/scheduler/pauses")
    assert web.post("/scheduler/pauses/limit", form).status_code == 403  # no token
    done = web.post("/scheduler/pauses/limit", {**form, "csrfmiddlewaretoken": token})
    assert done.status_code == 303 and done["Location"] == "/scheduler/pauses"
    (limit,) = [limit for limit in store.rate_limits() if limit.name == queue]
    assert (limit.count, limit.period, limit.burst) == (10, 1.0, 5)
    assert limit.set_by.startswith(f"{operator.username}@")
    assert queue in text(web.get("/scheduler/pauses"))
    assert [entry.object_repr for entry in log_entries(operator)] == [f"limit_queue queue {queue}"]
    store.unlimit_queue(queue)


def test_max_runs_and_overlap_through_the_recurring_edit_form(
    store: Client, make_user: Callable[..., Any]
) -> None:
    rid = f"r-{job_id()}"
    store.recurring.save(rid, "t.nightly", "30 2 * * *")
    url = f"/scheduler/recurring/edit?id={rid}"
    form = {"id": rid, "max_runs": "3", "overlap": "skip", "overlap_timeout": "600",
            "confirm": "yes"}  # fmt: skip
    # A user who may change jobs only is refused the edit
    jobs_only = browser(make_user("change_jobs"))
    token = form_token(jobs_only, "/scheduler/pauses")
    refused = jobs_only.post("/scheduler/recurring/edit", {**form, "csrfmiddlewaretoken": token})
    assert refused.status_code == 403
    operator = make_user("change_recurring")
    web = browser(operator)
    token = form_token(web, url)
    # A bad overlap is shown again with the schedule's own words, and nothing is written
    bad = web.post(
        "/scheduler/recurring/edit", {**form, "overlap": "sometimes", "csrfmiddlewaretoken": token}
    )
    assert bad.status_code == 400 and "overlap must be one of" in text(bad)
    kept = store.recurring.get(rid)
    assert kept is not None and (kept.schedule.max_runs, kept.schedule.overlap) == (None, "allow")
    done = web.post("/scheduler/recurring/edit", {**form, "csrfmiddlewaretoken": token})
    assert done.status_code == 303, text(done)
    saved = store.recurring.get(rid)
    assert saved is not None
    schedule = saved.schedule
    assert (schedule.max_runs, schedule.overlap, schedule.overlap_timeout) == (3, "skip", 600.0)
    assert schedule.cron == "30 2 * * *"  # a field the form left out keeps its value
    page = text(web.get(url))
    assert 'id="recurring-runs">Runs: 0 of 3.</span>' in page
    assert [entry.object_repr for entry in log_entries(operator)] == [
        f"recurring_edit recurring job {rid}"
    ]
    store.recurring.remove(rid)
