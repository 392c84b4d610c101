"""The app's configuration: its label and name in Django's registry, and what it wires up once
Django is ready: the system checks, and forgetting the cached client when its settings change."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["ParallelSchedulerConfig"]


class ParallelSchedulerConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    name = "parallel_scheduler.contrib.django"
    label = "parallel_scheduler"
    verbose_name = "Scheduler"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from parallel_scheduler.contrib.django import checks, conf

        checks.register()
        # weak=False: the receiver is a module function, kept for the process's life anyway
        setting_changed.connect(
            conf.on_setting_changed, weak=False, dispatch_uid="parallel_scheduler.settings"
        )
