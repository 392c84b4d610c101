"""Building the Flask application: configuration, the security checks every request passes
(auth, read-only, CSRF, headers), the error pages, and the views of ``pages_*``.

Order of the checks on a request: auth (401), then for a POST read-only (403) and the CSRF
token (400). Bad input anywhere is a 400 page naming the problem; storage that cannot be reached
is a 503 page; nothing a person types can produce a 500. A request under ``/api/v1/`` (the
HTTP API, ``dashboard/api``) passes the API's own checks instead and gets every error as JSON.
Embedded (``embedded=True``), the embedding site vouches for the viewer in the environ and checks
CSRF itself; read-only is then per request, from the viewer's permissions.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from flask import Flask, Response, abort, g, render_template, request, session
from werkzeug.exceptions import HTTPException

from parallel_scheduler.client import Client
from parallel_scheduler.dashboard import api, display, schedules
from parallel_scheduler.dashboard import health as dashboard_health
from parallel_scheduler.dashboard.context import (
    Dashboard,
    dashboard,
    embedded_viewer,
    read_only,
    viewer_zone,
)
from parallel_scheduler.dashboard.inputs import BadInput, parse_zone, zone_options
from parallel_scheduler.dashboard.pages import bulk as pages_bulk
from parallel_scheduler.dashboard.pages import calendars as pages_calendars
from parallel_scheduler.dashboard.pages import job_new as pages_job_new
from parallel_scheduler.dashboard.pages import jobs as pages_jobs
from parallel_scheduler.dashboard.pages import outcomes as pages_outcomes
from parallel_scheduler.dashboard.pages import overview as pages_overview
from parallel_scheduler.dashboard.pages import pauses as pages_pauses
from parallel_scheduler.dashboard.pages import recurring as pages_recurring
from parallel_scheduler.dashboard.pages import recurring_new as pages_recurring_new
from parallel_scheduler.dashboard.security import (
    SECURITY_HEADERS,
    BasicAuth,
    TokenAuth,
    authenticate,
    csrf_ok,
    embedded_csp,
    new_csrf_token,
)
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.limits import runs_text
from storage_adapters import (
    InvalidArgumentError,
    InvalidIdentifierError,
    StorageError,
    mask_url,
)

__all__ = ["build_app"]

logger = logging.getLogger(__name__)
#: How long a page waits for an unreachable store before saying so.
PAGE_RETRY_SECONDS = 3.0
#: Why an embedded dashboard refuses a request its site did not vouch for.
NOT_VOUCHED = "this dashboard is embedded: open it through the site that embeds it"


def _authenticate() -> Response | None:
    if dashboard().embedded:
        viewer = embedded_viewer()
        if viewer is None:
            abort(403, NOT_VOUCHED)
        g.who = f"{viewer.name}@{request.remote_addr or '-'}"
        return None
    who = authenticate(dashboard().auth, request.headers.get("Authorization", ""))
    if who is None:
        response = Response("authentication required\n", 401, mimetype="text/plain")
        response.headers["WWW-Authenticate"] = 'Basic realm="parallel-scheduler", charset="UTF-8"'
        return response
    g.who = f"{who}@{request.remote_addr or '-'}"
    return None


def _check_post() -> None:
    if request.method != "POST":
        return
    if dashboard().read_only:
        abort(403, "the dashboard is read-only: no action is allowed")
    if read_only():
        abort(403, "your account may only look here: this action needs a permission it lacks")
    if dashboard().embedded:  # the embedding site checked its own CSRF token
        return
    if not csrf_ok(session.get("csrf"), request.form.get("csrf_token")):
        abort(400, "missing or wrong CSRF token: reload the page and try again")


def _remember_zone() -> None:
    if "tz" in request.args:
        zone = parse_zone(request.args)
        if zone is None:
            session.pop("tz", None)
        else:
            session["tz"] = zone.key


def _before() -> Response | None:
    if api.is_api_request():  # the HTTP API: its own checks (bearer tokens need no CSRF)
        return api.check_request()
    refused = _authenticate()
    if refused is not None:
        return refused
    if "csrf" not in session and not dashboard().embedded:
        session["csrf"] = new_csrf_token()
    _check_post()
    _remember_zone()
    return None


def _headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    viewer = embedded_viewer()
    if viewer is not None:  # the site checks the Origin of POSTs, which no-referrer nulls
        response.headers["Content-Security-Policy"] = embedded_csp(viewer.stylesheets)
        response.headers["Referrer-Policy"] = "same-origin"
    return response


def _error_page(status: int, title: str, message: str) -> tuple[str, int] | Response:
    if api.is_api_request():  # the HTTP API answers every error in JSON
        return api.error_response(status, message)
    return render_template("message.html", title=title, message=message, status=status), status


def _install_errors(app: Flask) -> None:
    @app.errorhandler(BadInput)
    @app.errorhandler(InvalidJobError)
    def bad_input(exc: Exception) -> tuple[str, int] | Response:
        return _error_page(400, "Bad input", str(exc))

    @app.errorhandler(InvalidArgumentError)
    @app.errorhandler(InvalidIdentifierError)
    def refused_by_storage(exc: StorageError) -> tuple[str, int] | Response:
        return _error_page(400, "Bad input", str(exc))

    @app.errorhandler(StorageError)
    def storage_down(exc: StorageError) -> tuple[str, int] | Response:
        message = str(exc)
        url = dashboard().client.settings.storage_url
        if url:  # adapters mask their URL; this makes sure of it whatever the message holds
            message = message.replace(url, mask_url(url))
        logger.warning("dashboard: storage error: %s", message)
        return _error_page(503, "Storage unavailable", message)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        if exc.code in (301, 302, 303, 307, 308):
            return exc
        return _error_page(exc.code or 500, exc.name, exc.description or exc.name)


def _context() -> dict[str, Any]:
    zone = viewer_zone()
    now = time.time()
    viewer = embedded_viewer()
    return {
        "when": lambda value: display.when(value, zone, now),
        "absolute": lambda value: display.absolute(value, zone),
        "shown_options": lambda options: display.shown_options(options, zone),
        "describe_schedule": schedules.describe,
        "next_runs": lambda schedule: schedules.next_runs(schedule, now),
        "runs_text": runs_text,
        "read_only": read_only(),
        "csrf_token": viewer.csrf_token if viewer else session.get("csrf", ""),
        "csrf_field": viewer.csrf_field if viewer else "csrf_token",
        "embedded": viewer,
        "zone": zone,
        "zone_name": getattr(zone, "key", "UTC"),
        "zone_chosen": "tz" in session,
        "zone_options": zone_options,
        "who": g.get("who", ""),
    }


def build_app(
    client: Client | None,
    *,
    read_only: bool,
    auth: BasicAuth | TokenAuth | None,
    secret_key: str | bytes | None,
    embedded: bool = False,
    **settings: Any,
) -> Flask:
    if embedded and auth is not None:
        raise InvalidJobError("an embedded dashboard takes its viewer from the site: no auth")
    if auth is not None and not isinstance(auth, (BasicAuth, TokenAuth)):
        raise InvalidJobError("auth must be a BasicAuth or a TokenAuth")
    if client is None:
        client = Client(retry_for=PAGE_RETRY_SECONDS, **settings)
        client.setup()
    elif settings:
        raise InvalidJobError("pass either a client or settings, not both")
    app = Flask(__name__)
    app.secret_key = secret_key or secrets.token_bytes(32)
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_NAME="parallel_scheduler_dashboard",
        MAX_CONTENT_LENGTH=1024 * 1024,
        MAX_FORM_PARTS=600,  # a bulk action names up to 500 ticked jobs
    )
    app.jinja_env.autoescape = True  # every template, whatever its file name
    app.jinja_env.filters.update(
        utc=display.utc,
        in_zone=display.in_zone,
        pretty=display.pretty,
        duration=display.duration,
        badge=display.badge,
        absolute_in=display.absolute,
    )
    app.extensions["parallel_scheduler"] = Dashboard(client, read_only, auth, embedded)
    app.before_request(_before)
    app.after_request(_headers)
    app.context_processor(_context)
    _install_errors(app)
    pages_overview.register(app)
    pages_jobs.register(app)
    pages_bulk.register(app)
    pages_job_new.register(app)
    pages_recurring.register(app)
    pages_recurring_new.register(app)
    pages_outcomes.register(app)
    pages_pauses.register(app)
    pages_calendars.register(app)
    api.register(app)
    dashboard_health.register(app, client)  # the red banner on every page, and /metrics
    return app
