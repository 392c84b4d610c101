"""The ``Scheduler`` model: no table (``managed = False``), only the home of the app's
permissions (view, change jobs, change recurring jobs), the content type of its admin log
entries, and its line on the admin index."""

from __future__ import annotations

from django.db import models

__all__ = ["Scheduler"]


class Scheduler(models.Model):  # type: ignore[misc]  # Django ships no types
    """The scheduler's pages and API, as something Django can grant permissions on."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_scheduler", "Can view the scheduler"),
            ("change_jobs", "Can cancel, reschedule and run jobs now"),
            ("change_recurring", "Can create, edit, pause, trigger and remove recurring jobs"),
        ]
        verbose_name = "scheduler"
        verbose_name_plural = "Jobs and recurring jobs"
