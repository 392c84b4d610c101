"""The scheduler's pages in the test project, in Debian's headless Chromium: log in through the
admin's login form, see the admin's look (its stylesheet and variables, dark mode by the
system's preference), no page wider than the window at 1280 and 390 px, and cancel a job from
its page, checked in storage and in Django's admin log.

The Django site runs in a thread of the test process (werkzeug's server on a free loopback
port), with the admin's static files served as ``runserver`` serves them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from parallel_scheduler import Client
from parallel_scheduler.contrib.django import conf
from storage_adapters import JobState
from tests.browser.steps import follow
from tests.django.example_site import in_browser

SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})


@pytest.fixture
def site(django_db: tuple[str, ...]) -> Iterator[str]:
    """The test project over HTTP: its base URL."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.wsgi import get_wsgi_application
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, StaticFilesHandler(get_wsgi_application()), threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="django-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


@pytest.fixture
def store(django_db: tuple[str, ...]) -> Iterator[Client]:
    conf.reset()
    client = conf.get_client()
    client.setup()
    yield client
    conf.reset()


@pytest.fixture
def operator(django_db: tuple[str, ...]) -> Iterator[Any]:
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(f"op-{uuid.uuid4().hex[:10]}", password="pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="parallel_scheduler", codename="change_jobs")
    )
    yield user
    user.delete()


@pytest.fixture
def in_chromium(request: pytest.FixtureRequest) -> Callable[[Callable[[Any], None]], None]:
    """Runs browser steps in Debian's Chromium in a thread of their own (``in_browser``): the
    browser tier's session browser may hold Playwright's sync API in this thread."""
    return lambda steps: in_browser(steps, request.config)


def log_in(page: Any, site: str, user: Any) -> None:
    page.goto(site + "/scheduler/jobs")
    assert page.url.startswith(site + "/admin/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw")
    follow(page, "input[type=submit]")
    assert page.url == site + "/scheduler/jobs"


def test_the_pages_in_the_admin_look_at_both_widths_and_in_dark_mode(
    site: str, store: Client, operator: Any, in_chromium: Callable[[Callable[[Any], None]], None]
) -> None:
    jid = f"br-{uuid.uuid4().hex[:10]}"
    store.schedule("t.browser." + "long" * 30, countdown=600, job_id=jid)

    def steps(chromium: Any) -> None:
        for size in SIZES:
            for scheme in ("light", "dark"):
                context = chromium.new_context(
                    viewport=size, color_scheme=scheme, timezone_id="UTC"
                )
                try:
                    page = context.new_page()
                    log_in(page, site, operator)
                    body_bg = "() => getComputedStyle(document.body).backgroundColor"
                    for path in ("/scheduler/", "/scheduler/jobs", "/scheduler/recurring"):
                        page.goto(site + path)
                        assert page.inner_text("#site-name") == "Django administration"
                        widths = page.evaluate(
                            "() => [document.documentElement.scrollWidth, window.innerWidth]"
                        )
                        assert widths[0] <= widths[1], (path, size, widths)
                        expected = "rgb(18, 18, 18)" if scheme == "dark" else "rgb(255, 255, 255)"
                        assert page.evaluate(body_bg) == expected, (path, scheme)
                finally:
                    context.close()

    in_chromium(steps)
    store.cancel(jid)


def test_cancel_a_job_from_its_page_in_the_browser(
    site: str, store: Client, operator: Any, in_chromium: Callable[[Callable[[Any], None]], None]
) -> None:
    from django.contrib.admin.models import LogEntry

    jid = f"br-{uuid.uuid4().hex[:10]}"
    store.schedule("t.browser", countdown=600, job_id=jid)

    def steps(chromium: Any) -> None:
        context = chromium.new_context(viewport=SIZES[0], timezone_id="UTC")
        try:
            page = context.new_page()
            log_in(page, site, operator)
            page.goto(site + f"/scheduler/jobs/detail?id={jid}")
            page.check("#cancel-confirm")
            follow(page, "#cancel-submit")
            assert page.url == site + f"/scheduler/jobs/detail?id={jid}"
            assert page.inner_text("#flashes") == f"job {jid} cancelled"
            assert page.inner_text("#job-state") == "cancelled"
        finally:
            context.close()

    in_chromium(steps)
    record = store.storage.get_job(jid)
    assert record is not None and record.state is JobState.CANCELLED
    [entry] = LogEntry.objects.filter(user_id=operator.pk)
    assert entry.object_repr == f"cancel job {jid}"
