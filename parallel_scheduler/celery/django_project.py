"""The settings a Django project gives the scheduler, for the Celery plugin: a project that
installs the Django app (``parallel_scheduler.contrib.django``) sets them in its
``PARALLEL_SCHEDULER`` dict, and its workers and ``apply_async`` calls must use the same store
as its pages and management commands, not a default one. Read only for a Celery app configured
from Django's settings (``app.config_from_object("django.conf:settings", ...)``), the way
Django projects configure Celery: another app in the same process keeps its own settings.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DJANGO_APP", "django_overrides"]

#: The Django app whose presence in ``INSTALLED_APPS`` makes the plugin read Django's settings.
DJANGO_APP = "parallel_scheduler.contrib.django"
#: What a Celery app configured from Django's settings names as its configuration's source.
DJANGO_SETTINGS_SOURCE = "django.conf:settings"


def _configured_from_django(app: Any) -> bool:
    source = getattr(app, "_config_source", None)  # set by Celery's config_from_object
    if isinstance(source, str):
        return source == DJANGO_SETTINGS_SOURCE
    return type(source).__module__ == "django.conf"  # the settings object itself


def django_overrides(app: Any) -> dict[str, Any]:
    """The ``PARALLEL_SCHEDULER`` dict of the Django project this process runs, for a Celery
    ``app`` configured from its settings, when the project installs the Django app; ``{}``
    otherwise. Raises ``ConfigurationError`` when it is not a dict."""
    if not _configured_from_django(app):
        return {}
    django_conf = sys.modules.get("django.conf")
    if django_conf is None:  # Django never imported: not a Django process
        return {}
    settings = django_conf.settings
    if not (settings.configured or os.environ.get("DJANGO_SETTINGS_MODULE")):
        return {}
    if DJANGO_APP not in getattr(settings, "INSTALLED_APPS", ()):
        return {}
    from parallel_scheduler.contrib.django.conf import django_sources

    return django_sources().overrides
