"""``manage.py`` commands of the app: ``parallel_scheduler`` (``parallel_scheduler.py``)."""
