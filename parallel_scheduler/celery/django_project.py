"""The settings a Django project gives the scheduler, for the Celery plugin: a project that
installs the Django app (``parallel_scheduler.contrib.django``) sets them in its
``PARALLEL_SCHEDULER`` dict, and its workers and ``apply_async`` calls must use the same store
as its pages and management commands, not a default one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DJANGO_APP", "django_overrides"]

#: The Django app whose presence in ``INSTALLED_APPS`` makes the plugin read Django's settings.
DJANGO_APP = "parallel_scheduler.contrib.django"


def django_overrides() -> dict[str, Any]:
    """The ``PARALLEL_SCHEDULER`` dict of the Django project this process runs, when it installs
    the Django app; ``{}`` outside Django. Raises ``ConfigurationError`` when it is not a dict."""
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
