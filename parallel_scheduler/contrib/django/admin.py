"""The scheduler on the Django admin's index: the table-less ``Scheduler`` model registered
with a changelist that opens the scheduler's pages, shown to whoever may view them."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import path, reverse

from parallel_scheduler.contrib.django.models import Scheduler
from parallel_scheduler.contrib.django.permissions import access_of

__all__ = ["SchedulerAdmin"]


@admin.register(Scheduler)
class SchedulerAdmin(admin.ModelAdmin):  # type: ignore[misc]  # Django ships no types
    """No rows to list: the changelist is the scheduler's Overview."""

    def get_urls(self) -> list[Any]:
        info = (self.opts.app_label, self.opts.model_name)
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def changelist_view(self, request: Any, extra_context: Any = None) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("parallel_scheduler:index"))

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return access_of(request.user).view

    def has_module_permission(self, request: Any) -> bool:
        return access_of(request.user).view

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
