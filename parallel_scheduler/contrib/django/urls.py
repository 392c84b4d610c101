"""The scheduler's pages and API under a Django site's URL:
``path("scheduler/", include("parallel_scheduler.contrib.django.urls"))``. Every path under the
mount goes to the dashboard; ``parallel_scheduler:index`` names the Overview."""

from __future__ import annotations

from django.urls import path, re_path

from parallel_scheduler.contrib.django.views import dashboard

app_name = "parallel_scheduler"

urlpatterns = [
    path("", dashboard, name="index"),
    re_path(r"^(?P<rest>.+)$", dashboard, name="page"),
]
