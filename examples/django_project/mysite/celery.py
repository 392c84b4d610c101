"""The project's Celery app: configured from Django's settings (the ``CELERY_`` names), with the
parallel-scheduler plugin installed, so calls due more than a minute ahead wait in storage."""

import os

from celery import Celery

import parallel_scheduler.celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")

app = Celery("mysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
parallel_scheduler.celery.install(app)
