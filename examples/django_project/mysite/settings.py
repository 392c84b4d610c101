"""Settings of the example project: Django's usual ones, Celery's under the ``CELERY_`` names,
and parallel-scheduler's. Addresses come from the environment, with local defaults."""

import importlib.util
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "true") == "true"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "parallel_scheduler.contrib.django",
    "reminders",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "mysite.urls"
WSGI_APPLICATION = "mysite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite by default; PostgreSQL when POSTGRES_DB names a database.
if os.environ.get("POSTGRES_DB"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ["POSTGRES_DB"],
            "USER": os.environ.get("POSTGRES_USER", "postgres"),
            "PASSWORD": os.environ.get("POSTGRES_PASSWORD", ""),
            "HOST": os.environ.get("POSTGRES_HOST", "127.0.0.1"),
            "PORT": os.environ.get("POSTGRES_PORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "static"

# Celery, read by mysite/celery.py (namespace="CELERY").
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# parallel-scheduler: where delayed and recurring jobs wait (sqlite://, postgresql://, redis://),
# read by the pages under /scheduler/, `manage.py parallel_scheduler` and the Celery plugin
# (workers, and apply_async in every process); calls due more than 60 s ahead are stored there
# instead of held in a worker's memory.
SCHEDULER_STORAGE_URL = os.environ.get(
    "SCHEDULER_STORAGE_URL", f"sqlite:///{BASE_DIR / 'scheduler.sqlite3'}"
)
PARALLEL_SCHEDULER = {"storage_url": SCHEDULER_STORAGE_URL, "eta_threshold": 60}

# django.tasks (Django 6.0, or the django-tasks backport): tasks deferred with run_after wait in
# the same store and run on the Celery workers.
if importlib.util.find_spec("django.tasks") is None and importlib.util.find_spec("django_tasks"):
    INSTALLED_APPS.append("django_tasks")
if importlib.util.find_spec("django.tasks") or importlib.util.find_spec("django_tasks"):
    TASKS = {"default": {"BACKEND": "parallel_scheduler.contrib.django.tasks.DurableBackend"}}

# Where reminders.tasks.send_reminder "sends" its reminders: one line per reminder.
REMINDERS_OUTBOX = Path(os.environ.get("REMINDERS_OUTBOX", BASE_DIR / "outbox.log"))
