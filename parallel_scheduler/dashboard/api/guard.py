"""What every request to the HTTP API passes before its view runs, and how any refusal is said.

The checks, in order: auth (401, the dashboard's basic auth or bearer token), then for a request
that changes state (POST, PUT, PATCH, DELETE) read-only mode (403 ``read_only``) and the CSRF
rule (403 ``csrf``). A request authenticated by an ``Authorization: Bearer`` header needs no CSRF
token: no other site can make a browser send that header (it needs script and a CORS preflight
this server never grants). Every other state change (basic auth, which a browser repeats on its
own, or no auth at all) must carry the session's CSRF token in the ``X-CSRF-Token`` header, as
the dashboard's forms carry it in a field (``GET /api/v1/csrf-token`` hands it out).

Embedded in another site (the Django app), the site vouches for the viewer in the environ (403
without one) and checks CSRF itself (Django's ``X-CSRFToken``); a state change is refused (403
``forbidden``) unless the viewer may change that kind of thing (jobs, or recurring jobs).

Every refusal and every error is JSON: ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from flask import Response, g, request, session
from werkzeug.exceptions import MethodNotAllowed

from parallel_scheduler.dashboard.context import dashboard, embedded_viewer
from parallel_scheduler.dashboard.security import BasicAuth, authenticate, csrf_ok
from parallel_scheduler.engine.retrying import call_storage

__all__ = [
    "CSRF_HEADER",
    "PREFIX",
    "ApiError",
    "check_request",
    "error_response",
    "found",
    "is_api_request",
    "read_storage",
    "reply",
]

T = TypeVar("T")

PREFIX = "/api/v1"
CSRF_HEADER = "X-CSRF-Token"
#: The methods that only read; every other one changes state.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The error code of each status when the view names none.
CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    500: "internal_error",
    503: "storage_unavailable",
}


class ApiError(Exception):
    """A refusal a view raises: its status, its error code and a message naming the problem."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def is_api_request() -> bool:
    """Whether the current request is addressed to the API (relative to the app's mount)."""
    return request.path == PREFIX or request.path.startswith(PREFIX + "/")


def reply(body: Any, status: int = 200) -> Response:
    """``body`` as a JSON response (the views give strict JSON: no NaN, no infinity)."""
    return Response(json.dumps(body, ensure_ascii=False), status, mimetype="application/json")


def error_response(status: int, message: str, code: str | None = None) -> Response:
    error = {"code": code or CODES.get(status, "error"), "message": message}
    response = reply({"error": error}, status)
    routing = request.routing_exception
    if status == 405 and isinstance(routing, MethodNotAllowed) and routing.valid_methods:
        response.headers["Allow"] = ", ".join(sorted(routing.valid_methods))
    return response


def _refuse_unauthenticated() -> Response:
    refused = error_response(401, "authentication required: send basic auth or a bearer token")
    if isinstance(dashboard().auth, BasicAuth):
        challenge = 'Basic realm="parallel-scheduler", charset="UTF-8"'
    else:
        challenge = 'Bearer realm="parallel-scheduler"'
    refused.headers["WWW-Authenticate"] = challenge
    return refused


def _check_embedded() -> Response | None:
    viewer = embedded_viewer()
    if viewer is None:
        return error_response(403, "this API is embedded: call it through the site that embeds it")
    g.who = f"{viewer.name}@{request.remote_addr or '-'}"
    if request.method in SAFE_METHODS:
        return None
    if dashboard().read_only:
        return error_response(403, "the dashboard is read-only: no change is allowed", "read_only")
    if not viewer.may_change(request.endpoint):
        return error_response(
            403, "your account may only look here: this change needs a permission it lacks"
        )
    return None  # CSRF: the embedding site checked its own token before calling the dashboard


def check_request() -> Response | None:
    """Auth, then for a state change read-only mode and the CSRF rule; a refusal, or ``None``
    when the request may go on to its view."""
    board = dashboard()
    if board.embedded:
        return _check_embedded()
    header = request.headers.get("Authorization", "")
    who = authenticate(board.auth, header)
    if who is None:
        return _refuse_unauthenticated()
    g.who = f"{who}@{request.remote_addr or '-'}"
    if request.method in SAFE_METHODS:
        return None
    if board.read_only:
        return error_response(403, "the dashboard is read-only: no change is allowed", "read_only")
    by_bearer = header.partition(" ")[0].lower() == "bearer"
    if not by_bearer and not csrf_ok(session.get("csrf"), request.headers.get(CSRF_HEADER)):
        return error_response(
            403,
            f"missing or wrong CSRF token: send the session's token in the {CSRF_HEADER} header "
            f"(GET {PREFIX}/csrf-token), or authenticate with a bearer token",
            "csrf",
        )
    return None


def read_storage(read: Callable[[], T]) -> T:
    """``read()`` with the dashboard client's retries while storage is unreachable."""
    client = dashboard().client
    return call_storage(read, give_up_after=client.retry_for)


def found(record: T | None, what: str) -> T:
    """``record``, or a 404 naming ``what`` (``"job with id 'x'"``) when there is none."""
    if record is None:
        raise ApiError(404, "not_found", f"no {what}")
    return record
