"""The dashboard's HTTP API: JSON under ``/api/v1/`` on the dashboard's own server, with its
auth, read-only mode and CSRF rule (``guard``), described by an OpenAPI 3.1 document at
``/api/v1/openapi.json`` (``openapi``). Jobs (``jobs``), recurring jobs (``recurring``), the
workers' execution outcomes (``outcomes``), the pauses of queues and tasks (``pauses``) and their
rate limits (``limits``), the calendars of excluded dates (``calendars``), the status report, and
the session's CSRF token for browser use.

``register`` adds it to the dashboard's Flask app; the app hands every API request to
``check_request`` instead of the pages' checks, and renders every error of an API request with
``error_response`` (JSON), so even a 404 for an unknown URL under ``/api/v1/`` is JSON.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, request, session

from parallel_scheduler.dashboard.api import calendars, jobs, limits, outcomes, pauses, recurring
from parallel_scheduler.dashboard.api.guard import (
    CSRF_HEADER,
    PREFIX,
    ApiError,
    check_request,
    error_response,
    is_api_request,
    reply,
)
from parallel_scheduler.dashboard.api.openapi import document
from parallel_scheduler.dashboard.context import dashboard, embedded_viewer
from parallel_scheduler.dashboard.security import new_csrf_token
from parallel_scheduler.views import status_view

__all__ = ["PREFIX", "check_request", "error_response", "is_api_request", "register"]


def status() -> Response:
    """``parallel-scheduler status --json``: the status report with its health problems."""
    return reply(status_view(dashboard().client))


def csrf_token() -> Response:
    """The browser session's CSRF token (made now if the session has none), for a page script
    that sends state changes with the session's basic auth instead of a bearer token.
    Embedded, the site's own token and header (Django's ``X-CSRFToken``)."""
    viewer = embedded_viewer()
    if viewer is not None:
        return reply({"csrf_token": viewer.csrf_token, "header": viewer.csrf_header})
    if "csrf" not in session:
        session["csrf"] = new_csrf_token()
    return reply({"csrf_token": session["csrf"], "header": CSRF_HEADER})


def openapi() -> Response:
    return reply(document(request.script_root + PREFIX))


def _refused(exc: ApiError) -> Response:
    return error_response(exc.status, exc.message, exc.code)


def register(app: Flask) -> None:
    api = Blueprint("api_v1", __name__, url_prefix=PREFIX)
    api.register_error_handler(ApiError, _refused)
    jobs.register(api)
    recurring.register(api)
    outcomes.register(api)
    pauses.register(api)
    limits.register(api)
    calendars.register(api)
    api.add_url_rule("/status", "status", status)
    api.add_url_rule("/csrf-token", "csrf_token", csrf_token)
    api.add_url_rule("/openapi.json", "openapi", openapi)
    app.register_blueprint(api)
