"""The web dashboard: a Flask (WSGI) application over one store, mountable in any web app.

``create_app`` builds it; ``parallel-scheduler dashboard`` serves it with waitress. Pages are
rendered on the server (Jinja2, autoescaped) with one small stylesheet and one small script of
our own (``static/live.js``: the viewer's zone, the Overview's live updates; every page works
without it), so there is no build step and the strict Content-Security-Policy allows scripts
from the app itself only, never inline. Every URL is built with ``url_for``, relative to
wherever the app is mounted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parallel_scheduler.dashboard.security import BasicAuth, TokenAuth, parse_basic_auth
from storage_adapters.extras import require_driver

if TYPE_CHECKING:
    from flask import Flask

    from parallel_scheduler.client import Client

__all__ = ["BasicAuth", "TokenAuth", "create_app", "parse_basic_auth"]


def create_app(
    client: Client | None = None,
    *,
    read_only: bool = False,
    auth: BasicAuth | TokenAuth | None = None,
    secret_key: str | bytes | None = None,
    embedded: bool = False,
    **settings: Any,
) -> Flask:
    """The dashboard as a WSGI application.

    ``client``: the store to show; when omitted one is opened from ``settings`` (the same
    keyword overrides as ``Client``, else the ``PARALLEL_SCHEDULER_*`` environment). ``read_only``
    hides every action and refuses every POST (403). ``auth`` requires HTTP basic auth or a
    bearer token on every request (401 without). ``secret_key`` signs the session cookie that
    carries the CSRF token; without it a random key is drawn per process, so sessions do not
    survive a restart (give one when several processes serve the same dashboard).
    ``embedded``: mounted inside another site (the Django app's pages): each request must carry
    the site's ``Viewer`` in its environ (``security.VIEWER_KEY``), which says who it is and what
    they may change; the site checks CSRF itself (``auth`` must then be ``None``).
    """
    require_driver("flask", "the web dashboard")
    from parallel_scheduler.dashboard.app import build_app

    return build_app(
        client, read_only=read_only, auth=auth, secret_key=secret_key, embedded=embedded, **settings
    )
