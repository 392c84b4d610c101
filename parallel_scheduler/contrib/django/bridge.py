"""The dashboard's Flask app run inside a Django view: one app per process over
``conf.get_client()``, the request's WSGI environ re-rooted under the mount, and the WSGI answer
turned into an ``HttpResponse``.

``SCRIPT_NAME`` is set to the mount's prefix and ``PATH_INFO`` to the rest, so every URL the
dashboard builds with ``url_for`` stays under the mount. The body is rebuilt from
``request.body``, which Django's CSRF check may already have read (a multipart form is then
encoded again from what Django parsed, its uploaded files too).
"""

from __future__ import annotations

import io
import secrets
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from django.http.request import RawPostDataException

from parallel_scheduler.contrib.django import conf
from parallel_scheduler.dashboard import create_app
from parallel_scheduler.dashboard.security import VIEWER_KEY, Viewer

if TYPE_CHECKING:
    from flask import Flask

    from parallel_scheduler.client import Client

__all__ = ["dashboard_app", "environ_for", "respond"]

_guard = threading.Lock()
_built: list[tuple[Client, Flask]] = []


def _session_key() -> bytes:
    """The key of the dashboard's own session cookie (time zone, messages), from Django's
    ``SECRET_KEY`` so every process of the site signs it alike."""
    from django.utils.crypto import salted_hmac

    return bytes(salted_hmac("parallel_scheduler.contrib.django.bridge", "dashboard").digest())


def dashboard_app() -> Flask:
    """This process's embedded dashboard over ``conf.get_client()``, built again when the
    client changed (``conf.reset()``)."""
    from django.conf import settings

    client = conf.get_client()
    with _guard:
        if not _built or _built[0][0] is not client:
            client.setup()  # as the standalone dashboard does: idempotent
            app = create_app(client, secret_key=_session_key(), embedded=True)
            app.config["SESSION_COOKIE_SECURE"] = bool(settings.SESSION_COOKIE_SECURE)
            _built[:] = [(client, app)]
        return _built[0][1]


def _wsgi_text(text: str) -> str:
    """A path as WSGI carries it: its UTF-8 bytes as a latin-1 string."""
    return text.encode("utf-8").decode("latin-1")


def _quoted(text: str) -> str:
    """A field or file name inside a quoted header parameter, escaped as browsers do."""
    return text.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _multipart(request: Any) -> tuple[bytes, str]:
    """The fields and uploaded files Django parsed, as a multipart body and its content type."""
    boundary = f"parallel-scheduler-{secrets.token_hex(16)}"
    parts: list[bytes] = []

    def part(disposition: str, data: bytes, kind: str = "") -> None:
        head = f"--{boundary}\r\nContent-Disposition: form-data; {disposition}\r\n"
        head += f"Content-Type: {kind}\r\n" if kind else ""
        parts.append(head.encode("utf-8") + b"\r\n" + data + b"\r\n")

    for name, values in request.POST.lists():
        for value in values:
            part(f'name="{_quoted(name)}"', str(value).encode("utf-8"))
    for name, uploads in request.FILES.lists():
        for upload in uploads:
            kind = upload.content_type or "application/octet-stream"
            part(f'name="{_quoted(name)}"; filename="{_quoted(upload.name)}"', upload.read(), kind)
    parts.append(f"--{boundary}--\r\n".encode("ascii"))
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _body(request: Any, environ: dict[str, Any]) -> bytes:
    try:
        body: bytes = request.body
    except RawPostDataException:  # a multipart form Django parsed from the stream: re-encode
        if request.FILES:
            body, environ["CONTENT_TYPE"] = _multipart(request)
        else:
            environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
            body = request.POST.urlencode().encode("ascii")
    return body


def environ_for(request: Any, rest: str, viewer: Viewer) -> dict[str, Any]:
    """The WSGI environ of ``request`` for the dashboard: mounted where ``rest`` begins."""
    environ = dict(request.META)
    prefix = request.path[: len(request.path) - len(rest)].rstrip("/")
    environ["SCRIPT_NAME"] = _wsgi_text(prefix)
    environ["PATH_INFO"] = _wsgi_text("/" + rest)
    environ.setdefault("QUERY_STRING", "")
    body = _body(request, environ)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ["wsgi.version"] = (1, 0)
    environ["wsgi.url_scheme"] = request.scheme
    environ.setdefault("wsgi.errors", sys.stderr)
    environ.setdefault("wsgi.multithread", True)
    environ.setdefault("wsgi.multiprocess", True)
    environ.setdefault("wsgi.run_once", False)
    environ.pop("wsgi.file_wrapper", None)  # the body is read here, never handed to a server
    environ[VIEWER_KEY] = viewer
    return environ


def respond(app: Flask, environ: dict[str, Any]) -> HttpResponse:
    """Run ``app`` on ``environ``; its status, headers (each Set-Cookie) and body."""
    started: dict[str, Any] = {}
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started["status"], started["headers"] = status, headers
        return written.append

    result: Iterable[bytes] = app(environ, start_response)
    try:
        written.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    code, _, reason = started["status"].partition(" ")
    response = HttpResponse(b"".join(written), status=int(code), reason=reason or None)
    for name, value in started["headers"]:
        if name.lower() == "set-cookie":
            response.cookies.load(value)
        elif name in response.headers and name.lower() != "content-type":
            response.headers[name] = f"{response.headers[name]}, {value}"
        else:
            response.headers[name] = value
    return response
