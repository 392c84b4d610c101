"""Celery integration and end-to-end tests with real brokers and workers."""
