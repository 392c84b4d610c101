"""examples/django_project does what its README says, from scratch, on SQLite and on PostgreSQL.

The project is copied into the test's directory and driven only from outside: ``manage.py
migrate``, users made with ``manage.py shell -c``, the django-celery-beat import, ``runserver``
and a real Celery worker (``--parallel-scheduler``) as child processes, and a headless Chromium
that logs in through the admin. Storage is read back with ``manage.py parallel_scheduler``, the
admin log with ``manage.py shell -c``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import wait_until
from tests.browser.steps import follow
from tests.conftest import POSTGRESQL_URL, require_server
from tests.django.example_site import PASSWORD, Site, in_browser

pytestmark = [pytest.mark.celery, pytest.mark.slow, pytest.mark.redis]

USERS = f"""
from django.contrib.auth.models import Permission, User
User.objects.create_superuser("admin", "admin@example.com", {PASSWORD!r})
viewer = User.objects.create_user("viewer", password={PASSWORD!r}, is_staff=True)
viewer.user_permissions.add(Permission.objects.get(codename="view_scheduler"))
User.objects.create_user("outsider", password={PASSWORD!r})
print("[]")
"""
SCHEDULE = """
import json
from reminders.tasks import send_reminder
cancelled = send_reminder.apply_async((1, "renew your plan"), countdown=3600)
kept = send_reminder.apply_async((2, "your trial ends"), countdown=3600)
soon = send_reminder.schedule((3, "welcome"), countdown=1)
print(json.dumps([cancelled.id, kept.id, soon.id]))
"""
PERIODIC_TASK_ENABLED = """
import json
from django_celery_beat.models import PeriodicTask
print(json.dumps(PeriodicTask.objects.get(name="weekly-digest").enabled))
"""
ADMIN_LOG = """
import json
from django.contrib.admin.models import LogEntry
print(json.dumps([[e.user.username, e.object_repr] for e in LogEntry.objects.order_by("pk")]))
"""
# A session of the non-staff user, made as Django's test client logs a user in: the admin's
# login form refuses non-staff users, and the example has no other login page.
OUTSIDER_SESSION = f"""
import json
from django.test import Client
client = Client()
assert client.login(username="outsider", password={PASSWORD!r})
print(json.dumps(client.cookies["sessionid"].value))
"""
DIGEST = "weekly-digest"


@pytest.fixture
def sqlite_site(tmp_path: Path) -> Iterator[Site]:
    require_server("redis")
    site = Site(tmp_path)
    try:
        yield site
    finally:
        site.stop()


@pytest.fixture
def postgresql_site(tmp_path: Path) -> Iterator[Site]:
    """The example on a throwaway PostgreSQL database, Django's tables and the store's both."""
    import psycopg

    require_server("postgresql")
    require_server("redis")
    server = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://").rsplit("/", 1)[0]
    name = f"ps_django_example_{tmp_path.name[-12:].lower().replace('-', '_')}"
    with psycopg.connect(server + "/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    user, _, host = server.split("://", 1)[1].rpartition("@")
    site = Site(
        tmp_path,
        POSTGRES_DB=name,
        POSTGRES_USER=user.partition(":")[0] or "postgres",
        POSTGRES_PASSWORD=user.partition(":")[2],
        POSTGRES_HOST=host.partition(":")[0],
        POSTGRES_PORT=host.partition(":")[2] or "5432",
        SCHEDULER_STORAGE_URL=f"{server}/{name}",
    )
    try:
        yield site
    finally:
        try:
            site.stop()
        finally:
            with psycopg.connect(server + "/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_and_import(site: Site) -> None:
    """The README's first steps: migrate (which creates the beat task), users, the import."""
    site.manage("migrate", "--no-input", "-v", "0")
    site.shell(USERS)
    assert site.shell(PERIODIC_TASK_ENABLED) is True
    imported = site.manage("parallel_scheduler", "import-django-celery-beat", "--disable-source")
    assert "imported 1 create" in imported.stdout, imported.stdout
    assert site.shell(PERIODIC_TASK_ENABLED) is False  # beat will not fire it any more
    digest = site.json_of("recurring", "show", DIGEST)
    assert (digest["cron"], digest["timezone"], digest["enabled"]) == (
        "30 7 * * 1",
        "Europe/Paris",
        True,
    )


def log_in(browser: Any, url: str, username: str) -> tuple[Any, Any]:
    """A fresh context logged in through the admin's login form; the context and its page."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="UTC")
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(url + "/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    follow(page, "input[type=submit]")
    return context, page


def pause_digest(page: Any) -> None:
    """On the recurring page: tick the pause form's confirmation and submit it."""
    row = page.locator(f"#recurring-table tr[data-recurring-id='{DIGEST}']")
    pause = row.locator("form.recurring-action[data-action='pause']")
    pause.locator("input[name=confirm]").check()
    follow(page, pause.locator("button[type=submit]"))
    assert DIGEST in page.inner_text("#flashes")
    assert row.locator(".recurring-paused .badge-paused").inner_text() == "paused"
    # who paused it is the Django user viewing the dashboard
    assert row.locator(".recurring-paused .paused-by").inner_text().startswith("by admin@")


def csrf_token(context: Any) -> str:
    return str(next(c["value"] for c in context.cookies() if c["name"] == "csrftoken"))


def test_the_example_on_sqlite(sqlite_site: Site, request: pytest.FixtureRequest) -> None:
    site = sqlite_site
    migrate_and_import(site)
    url = site.start_server()
    site.start_worker()
    cancelled, kept, soon = site.shell(SCHEDULE)
    try:
        # The job due in a second runs on the worker (its reminder is in the outbox)...
        wait_until(lambda: site.outbox.exists() and soon in site.outbox.read_text(), timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{site.logs()}") from None
    assert "reminder for user 3: welcome" in site.outbox.read_text()
    # ... and the two due in an hour wait in storage.
    assert {site.json_of("show", job)["state"] for job in (cancelled, kept)} == {"scheduled"}

    def as_staff(browser: Any) -> None:
        context, page = log_in(browser, url, "admin")
        # The admin index links to the scheduler's pages.
        follow(page, page.get_by_role("link", name="Jobs and recurring jobs", exact=True))
        assert page.url == url + "/scheduler/"
        follow(page, "#nav-jobs")
        follow(page, f"#jobs-table tr[data-job-id='{cancelled}'] a.job-link")
        page.check("#cancel-confirm")
        follow(page, "#cancel-submit")
        assert page.inner_text("#flashes") == f"job {cancelled} cancelled"
        follow(page, "#nav-recurring")
        pause_digest(page)
        context.close()

    def as_viewer(browser: Any) -> dict[str, int]:
        context, page = log_in(browser, url, "viewer")
        follow(page, page.get_by_role("link", name="Jobs and recurring jobs", exact=True))
        for path in (
            "/scheduler/jobs",
            f"/scheduler/jobs/detail?id={kept}",
            "/scheduler/recurring",
        ):
            response = page.goto(url + path)
            assert response is not None and response.status == 200, path
            assert page.locator("#cancel-form, #job-actions, form.recurring-action").count() == 0
        token = csrf_token(context)
        forced = {
            "jobs": {"id": kept, "action": "cancel"},
            "recurring": {"id": DIGEST, "action": "resume"},
        }
        statuses = {
            kind: page.request.post(
                f"{url}/scheduler/{kind}/action",
                form={**form, "confirm": "yes", "csrfmiddlewaretoken": token},
                max_redirects=0,
            ).status
            for kind, form in forced.items()
        }
        context.close()
        return statuses

    def as_outsider(browser: Any) -> tuple[str, int, int]:
        # The admin's login form turns a non-staff user away...
        context, page = log_in(browser, url, "outsider")
        assert "staff account" in page.inner_text("#content")
        context.close()
        # ... and with a session of their own, the pages send them to it and the API refuses.
        context = browser.new_context()
        context.add_cookies(
            [{"name": "sessionid", "value": site.shell(OUTSIDER_SESSION), "url": url}]
        )
        page = context.new_page()
        page.goto(url + "/scheduler/jobs")
        landed = page.url
        api = page.request.get(url + "/scheduler/api/v1/jobs").status
        page.goto(url + "/admin/login/")
        forced = page.request.post(
            url + "/scheduler/jobs/action",
            form={"id": kept, "action": "cancel", "confirm": "yes",
                  "csrfmiddlewaretoken": csrf_token(context)},
            max_redirects=0,
        ).status  # fmt: skip
        context.close()
        return landed, api, forced

    in_browser(as_staff, request.config)
    # Storage says the job is cancelled and the recurring job paused...
    assert site.json_of("show", cancelled)["state"] == "cancelled"
    assert site.json_of("recurring", "show", DIGEST)["enabled"] is False
    # ... and Django's admin log has both actions, by the staff user.
    entries = site.shell(ADMIN_LOG)
    assert ["admin", f"cancel job {cancelled}"] in entries, entries
    assert ["admin", f"recurring_pause recurring job {DIGEST}"] in entries, entries

    assert in_browser(as_viewer, request.config) == {"jobs": 403, "recurring": 403}
    landed, api, forced = in_browser(as_outsider, request.config)
    assert landed == f"{url}/admin/login/?next=/scheduler/jobs"
    assert (api, forced) == (403, 302)
    # Nothing the viewer or the outsider asked for was done.
    assert site.json_of("show", kept)["state"] == "scheduled"
    assert site.json_of("recurring", "show", DIGEST)["enabled"] is False
    assert len(site.shell(ADMIN_LOG)) == len(entries)


@pytest.mark.postgresql
def test_the_example_on_postgresql(postgresql_site: Site, request: pytest.FixtureRequest) -> None:
    site = postgresql_site
    migrate_and_import(site)
    url = site.start_server()

    def pause(browser: Any) -> None:
        context, page = log_in(browser, url, "admin")
        response = page.goto(url + "/scheduler/recurring")
        assert response is not None and response.status == 200
        pause_digest(page)
        context.close()

    in_browser(pause, request.config)
    assert site.json_of("recurring", "show", DIGEST)["enabled"] is False
    assert ["admin", f"recurring_pause recurring job {DIGEST}"] in site.shell(ADMIN_LOG)
