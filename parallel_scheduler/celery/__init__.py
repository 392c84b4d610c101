"""Celery integration: loading the user's app and building a dispatcher for it."""

from __future__ import annotations

from .app_loading import app_for_broker, load_app

__all__ = ["app_for_broker", "load_app"]
