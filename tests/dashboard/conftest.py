"""The dashboard tier: the Flask app driven by its test client against real storage (SQLite,
PostgreSQL, Redis through the shared ``storage`` fixture). The browser tier (tests/browser)
drives the same pages in Chromium."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from parallel_scheduler import Client
from parallel_scheduler.dashboard import create_app
from storage_adapters import Storage

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def client(storage: Storage) -> Client:
    return Client(storage, retry_for=1.0)


@pytest.fixture
def make_app(client: Client) -> Callable[..., Flask]:
    def make(**options: Any) -> Flask:
        app = create_app(client, **options)
        app.testing = True
        return app

    return make


@pytest.fixture
def web(make_app: Callable[..., Flask]) -> FlaskClient:
    return make_app().test_client()


def csrf_token(web: FlaskClient, url: str = "/jobs") -> str:
    """The session's CSRF token, as a page's forms carry it."""
    page = web.get(url)
    assert page.status_code == 200, page.data
    found = _CSRF.search(page.get_data(as_text=True))
    if found is None:  # a page without forms: the token is also in the session cookie
        with web.session_transaction() as session:
            return str(session["csrf"])
    return found.group(1)


def session_token(web: FlaskClient) -> str:
    web.get("/")
    with web.session_transaction() as session:
        return str(session["csrf"])
