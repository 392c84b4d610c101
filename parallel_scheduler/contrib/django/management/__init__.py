"""The app's management commands (``manage.py parallel_scheduler``)."""
