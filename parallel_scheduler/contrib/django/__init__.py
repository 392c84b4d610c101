"""The Django app (extra ``[django]``): add ``"parallel_scheduler.contrib.django"`` to
``INSTALLED_APPS`` for settings from Django's, system checks, the ``parallel_scheduler``
management command, the dashboard and API under Django's auth, the django-celery-beat import and
a ``django.tasks`` backend whose deferred tasks wait in durable storage."""
