"""The admin, and the scheduler's pages and API under ``/scheduler/`` (staff only)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("scheduler/", include("parallel_scheduler.contrib.django.urls")),
]
