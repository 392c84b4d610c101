"""The Django project the Django tests run in: the admin, django-celery-beat, the app, and two
databases, SQLite (``default``) and a throwaway PostgreSQL database (``postgresql``), so every
ORM-backed behaviour can be checked on both with ``using=``.

``configure()`` is called once per test process by ``tests/django/conftest.py``.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import django

from tests.conftest import POSTGRESQL_URL

#: The test process's scratch folder: the SQLite databases (Django's and the scheduler's).
SCRATCH = Path(tempfile.mkdtemp(prefix="ps-django-"))
#: This process's PostgreSQL database, created by ``conftest.create_postgresql_database``.
PG_DATABASE = f"ps_django_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def postgresql_parts() -> dict[str, Any]:
    """Host, port and user of the test server, from the suite's PostgreSQL URL."""
    rest = POSTGRESQL_URL.split("://", 1)[1]
    credentials, _, location = rest.rpartition("@")
    user, _, password = credentials.partition(":")
    hostport = location.split("/", 1)[0]
    host, _, port = hostport.partition(":")
    return {"USER": user or "postgres", "PASSWORD": password, "HOST": host, "PORT": port or "5432"}


def tasks_apps() -> list[str]:
    """The ``django.tasks`` backport's app, on Django releases without ``django.tasks``."""
    if django.VERSION >= (6, 0):
        return []
    return ["django_tasks"]


def settings_dict() -> dict[str, Any]:
    return {
        "SECRET_KEY": "tests-only-" + uuid.uuid4().hex,
        "DEBUG": False,
        "ALLOWED_HOSTS": ["*"],
        "USE_TZ": True,
        "TIME_ZONE": "UTC",
        "INSTALLED_APPS": [
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.staticfiles",
            "django_celery_beat",
            *tasks_apps(),
            "parallel_scheduler.contrib.django",
        ],
        "MIDDLEWARE": [
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        "ROOT_URLCONF": "tests.django.urls",
        "TEMPLATES": [
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "DIRS": [],
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        "DATABASES": {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(SCRATCH / "django.sqlite3"),
            },
            "postgresql": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": PG_DATABASE,
                **postgresql_parts(),
            },
        },
        "DEFAULT_AUTO_FIELD": "django.db.models.AutoField",
        "STATIC_URL": "/static/",
        "PARALLEL_SCHEDULER": {"storage_url": f"sqlite:///{SCRATCH / 'scheduler.sqlite3'}"},
    }


def configure() -> None:
    from django.conf import settings

    if not settings.configured:
        settings.configure(**settings_dict())
        django.setup()
