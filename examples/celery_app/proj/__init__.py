"""An example Celery project with parallel-scheduler installed (see ../README.md)."""

from proj.celery import app

__all__ = ["app"]
