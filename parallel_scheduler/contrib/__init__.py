"""Integrations with frameworks beyond Celery, each in its own package and extra."""
