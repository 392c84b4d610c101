"""Django settings of the real ``celery worker`` the ``django.tasks`` end-to-end tests start
(``DJANGO_SETTINGS_MODULE=tests.django.worker_settings``): a project as the docs show it, whose
broker, queue, scratch folder and scheduler storage the test passes in the environment."""

from __future__ import annotations

import os

import django

SCRATCH = os.environ["PS_DJANGO_SCRATCH"]
STORAGE_URL = os.environ["PS_DJANGO_STORAGE_URL"]

SECRET_KEY = "tests-only-worker"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    *([] if django.VERSION >= (6, 0) else ["django_tasks"]),
    "parallel_scheduler.contrib.django",
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{SCRATCH}/worker.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

TASKS = {
    "default": {
        "BACKEND": "parallel_scheduler.contrib.django.tasks.DurableBackend",
        "QUEUES": ["default"],
    }
}
PARALLEL_SCHEDULER = {"storage_url": STORAGE_URL}

# Celery, read with namespace="CELERY" (tests/django/worker_celery.py)
CELERY_BROKER_URL = os.environ["PS_DJANGO_BROKER_URL"]
CELERY_TASK_DEFAULT_QUEUE = os.environ["PS_DJANGO_QUEUE"]
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_PARALLEL_SCHEDULER_STORAGE_URL = STORAGE_URL
CELERY_PARALLEL_SCHEDULER_POLL_INTERVAL = 0.2
