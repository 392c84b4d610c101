"""The Celery app of the ``django.tasks`` end-to-end tests' worker, as a Django project's
``proj/celery.py`` holds it: settings from Django's (namespace ``CELERY``), the plugin
installed, and the installed apps' ``tasks`` modules discovered (which registers
``parallel_scheduler.django_task``)."""

from __future__ import annotations

import os

from celery import Celery

import parallel_scheduler.celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.worker_settings")

app = Celery("django_worker")
app.config_from_object("django.conf:settings", namespace="CELERY")
parallel_scheduler.celery.install(app)
app.autodiscover_tasks()
