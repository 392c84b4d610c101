"""The test project's URLs: the admin, and the app's pages and API under ``/scheduler/``."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("scheduler/", include("parallel_scheduler.contrib.django.urls")),
]
