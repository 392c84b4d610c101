"""The example project; importing it loads the Celery app, so ``@shared_task`` uses it."""

from mysite.celery import app as celery_app

__all__ = ["celery_app"]
