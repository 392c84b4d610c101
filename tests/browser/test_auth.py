"""Basic auth and bearer token: with either configured, no page is shown without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import Error as PlaywrightError

from parallel_scheduler import Client
from parallel_scheduler.dashboard import BasicAuth, TokenAuth
from tests.browser.data import DataSet

SECRET = "s3cret-Password"
TOKEN = "tok-0123456789abcdef"


def _refused(browser: Any, url: str, **options: Any) -> None:
    """A browser with these credentials (or none) is shown no page: the 401 either ends the
    navigation (headless Chromium cannot prompt for a password) or is shown as a bare refusal;
    the same request's status and body say why."""
    context = browser.new_context(**options)
    try:
        page = context.new_page()
        try:
            response = page.goto(url)
        except PlaywrightError as exc:
            assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
        else:
            assert response is not None and response.status == 401
            assert page.locator("#counts").count() == 0
        response = context.request.get(url)
        assert response.status == 401
        assert "basic" in (response.headers.get("www-authenticate") or "").lower()
        assert "Overview" not in response.text()
    finally:
        context.close()


def _shown(browser: Any, url: str, scheduled: int, **options: Any) -> str:
    """The overview a browser with these credentials is shown: its HTML."""
    context = browser.new_context(**options)
    try:
        page = context.new_page()
        response = page.goto(url)
        assert response is not None and response.status == 200
        assert page.inner_text("#count-scheduled td.num") == str(scheduled)
        return str(page.content())
    finally:
        context.close()


def test_basic_auth_is_required_and_the_password_is_never_shown(
    serve: Callable[..., str], client: Client, data: DataSet, browser: Any
) -> None:
    url = serve(client, auth=BasicAuth("ops", SECRET)) + "/"
    scheduled = client.counts()["scheduled"]
    _refused(browser, url)
    _refused(browser, url, http_credentials={"username": "ops", "password": "nope"})
    _refused(browser, url, http_credentials={"username": "root", "password": SECRET})
    page = _shown(browser, url, scheduled, http_credentials={"username": "ops", "password": SECRET})
    assert SECRET not in page


def test_a_bearer_token_is_required(
    serve: Callable[..., str], client: Client, data: DataSet, browser: Any
) -> None:
    url = serve(client, auth=TokenAuth(TOKEN)) + "/"
    scheduled = client.counts()["scheduled"]
    _refused(browser, url)
    _refused(browser, url, extra_http_headers={"Authorization": "Bearer not-the-token"})
    page = _shown(browser, url, scheduled, extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
    assert TOKEN not in page
    # A browser cannot send a bearer header by itself: its login prompt sends the token as
    # the basic-auth password, which the dashboard accepts.
    _shown(browser, url, scheduled, http_credentials={"username": "me", "password": TOKEN})
