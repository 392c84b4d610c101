"""Who may use the dashboard and how a request proves it: HTTP basic auth or a bearer token,
the per-session CSRF token every POST must carry, read-only mode, and the response headers.
Embedded in another site (``create_app(embedded=True)``, as the Django app mounts it), the site
vouches for the viewer instead: a ``Viewer`` in the WSGI environ under ``VIEWER_KEY``.

Secrets are compared with ``hmac.compare_digest`` so a wrong guess takes as long as a near miss.
A browser cannot send a bearer header without script, so with a token configured the token is
also accepted as the password of basic auth (any user name): the browser's own login prompt
then works.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from parallel_scheduler.errors import ConfigurationError

__all__ = [
    "CSP",
    "VIEWER_KEY",
    "BasicAuth",
    "TokenAuth",
    "Viewer",
    "authenticate",
    "csrf_ok",
    "embedded_csp",
    "new_csrf_token",
    "parse_basic_auth",
]

#: Scripts (``static/live.js`` alone: never inline), styles, images and the live updates'
#: fetches only from the app itself; never framed.
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


#: The WSGI environ key under which an embedding site hands the dashboard its ``Viewer``.
VIEWER_KEY = "parallel_scheduler.viewer"


@dataclass(frozen=True)
class Viewer:
    """Who the embedding site let in and what they may do, for one request.

    ``can_change_jobs`` allows the job actions (cancel, reschedule, run now, bulk), pausing or
    resuming a queue or a task, its rate limits and the calendars of excluded dates, and
    ``can_change_recurring`` the recurring ones (create, edit, pause, resume, trigger, remove).
    The site checks CSRF itself: the forms carry ``csrf_token`` in the field ``csrf_field`` and
    the API names ``csrf_header``. ``on_audit(action, ids, detail)`` is called after every
    action's audit line; ``stylesheets``, ``site_name`` and ``site_url`` dress the pages as the
    site's own.
    """

    name: str
    can_change_jobs: bool = False
    can_change_recurring: bool = False
    csrf_token: str = ""
    csrf_field: str = "csrf_token"
    csrf_header: str = "X-CSRF-Token"
    on_audit: Callable[[str, Sequence[str], str], None] | None = None
    stylesheets: tuple[str, ...] = ()
    site_name: str = ""
    site_url: str = ""

    def may_change(self, endpoint: str | None) -> bool:
        """Whether the view ``endpoint`` (``recurring*`` or a job's) may change state."""
        name = (endpoint or "").rpartition(".")[2]
        if name.startswith("recurring"):
            return self.can_change_recurring
        return self.can_change_jobs


def embedded_csp(stylesheets: Sequence[str]) -> str:
    """The CSP, with the origins of the embedding site's stylesheets when they live elsewhere
    (a CDN for static files); same-site ones are already ``'self'``."""
    origins = sorted({_origin(url) for url in stylesheets} - {""})
    if not origins:
        return CSP
    return CSP.replace("style-src 'self'", "style-src 'self' " + " ".join(origins))


def _origin(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https") or not rest:
        return ""
    host = rest.split("/", 1)[0]
    if not host or any(c in host for c in " ;'\"\\"):
        return ""
    return f"{scheme}://{host}"


@dataclass(frozen=True)
class BasicAuth:
    """HTTP basic auth with one user name and password."""

    user: str
    password: str

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user or not self.password:
            raise ConfigurationError(
                "basic auth needs USER:PASSWORD with a non-empty user (no ':') and password"
            )

    def __repr__(self) -> str:  # never print the password
        return f"BasicAuth(user={self.user!r}, password='***')"


@dataclass(frozen=True)
class TokenAuth:
    """``Authorization: Bearer <token>`` (or the token as a basic-auth password)."""

    token: str

    def __post_init__(self) -> None:
        if len(self.token) < 8:
            raise ConfigurationError("the dashboard token must be at least 8 characters")

    def __repr__(self) -> str:
        return "TokenAuth(token='***')"


def parse_basic_auth(text: str) -> BasicAuth:
    """``USER:PASSWORD`` (the password may contain ':')."""
    user, sep, password = text.partition(":")
    if not sep:
        raise ConfigurationError("basic auth must be given as USER:PASSWORD")
    return BasicAuth(user, password)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (user, password) if sep else None


def authenticate(auth: BasicAuth | TokenAuth | None, header: str) -> str | None:
    """Who the ``Authorization`` header proves the caller is (``"anonymous"`` when no auth is
    configured), or ``None`` when it proves nothing."""
    if auth is None:
        return "anonymous"
    basic = _basic(header)
    if isinstance(auth, BasicAuth):
        if basic is None:
            return None
        user_ok = _same(basic[0], auth.user)
        password_ok = _same(basic[1], auth.password)
        return auth.user if user_ok and password_ok else None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and _same(value.strip(), auth.token):
        return "token"
    if basic is not None and _same(basic[1], auth.token):
        return f"token:{basic[0] or '-'}"
    return None


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(expected: object, given: object) -> bool:
    return (
        isinstance(expected, str)
        and isinstance(given, str)
        and bool(given)
        and _same(given, expected)
    )
