"""The scheduler's pages and API in a Django site: one view under the mount that lets in who
Django's auth and the ``Scheduler`` permissions allow, and hands the request to the dashboard.

Refusals: anonymous or non-staff users are sent to the admin's login for pages (as the admin
does) and get a JSON 401/403 under ``api/``; staff without a ``Scheduler`` permission get 403.
The view is not CSRF-exempt: Django's ``CsrfViewMiddleware`` checks every state change before
the dashboard sees it (the forms carry ``csrfmiddlewaretoken``, the API takes ``X-CSRFToken``).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse

from parallel_scheduler.contrib.django import admin_log, bridge
from parallel_scheduler.contrib.django.permissions import Access, access_of
from parallel_scheduler.dashboard.security import Viewer

__all__ = ["dashboard"]

#: The admin's stylesheets the pages load (its CSS variables; dark mode by the viewer's system).
ADMIN_STYLESHEETS = ("admin/css/base.css", "admin/css/dark_mode.css")


def _is_api(rest: str) -> bool:
    return rest == "api" or rest.startswith("api/")


def _admin_url(name: str, fallback: str) -> str:
    if not apps.is_installed("django.contrib.admin"):
        return fallback
    try:
        return str(reverse(f"admin:{name}"))
    except NoReverseMatch:
        return fallback


def _api_refusal(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _refusal(request: Any, access: Access, api: bool) -> HttpResponse | None:
    if access.view:
        return None
    if api:
        if not request.user.is_authenticated:
            return _api_refusal(401, "unauthorized", "log in to the site first (session cookie)")
        return _api_refusal(403, "forbidden", "your account may not use the scheduler")
    if not access.staff:
        login = _admin_url("login", str(settings.LOGIN_URL))
        return redirect_to_login(request.get_full_path(), login)
    raise PermissionDenied("your account has no permission on the scheduler")


def _csrf_header() -> str:
    meta_name = str(settings.CSRF_HEADER_NAME)
    if meta_name == "HTTP_X_CSRFTOKEN":
        return "X-CSRFToken"
    return meta_name.removeprefix("HTTP_").replace("_", "-").title()


def _site_name() -> str:
    if apps.is_installed("django.contrib.admin"):
        from django.contrib.admin import site

        return str(site.site_header)
    return "Django site"


def _viewer(request: Any, access: Access) -> Viewer:
    user = request.user
    stylesheets = ADMIN_STYLESHEETS if apps.is_installed("django.contrib.admin") else ()
    return Viewer(
        name=str(user.get_username()),
        can_change_jobs=access.change_jobs,
        can_change_recurring=access.change_recurring,
        csrf_token=get_token(request),
        csrf_field="csrfmiddlewaretoken",
        csrf_header=_csrf_header(),
        on_audit=admin_log.recorder(user.pk),
        stylesheets=tuple(static(path) for path in stylesheets),
        site_name=_site_name(),
        site_url=_admin_url("index", "/"),
    )


def dashboard(request: Any, rest: str = "") -> HttpResponse:
    """Any page or API call under the mount (``rest``: the path after it)."""
    access = access_of(request.user)
    refused = _refusal(request, access, _is_api(rest))
    if refused is not None:
        return refused
    environ = bridge.environ_for(request, rest, _viewer(request, access))
    return bridge.respond(bridge.dashboard_app(), environ)
