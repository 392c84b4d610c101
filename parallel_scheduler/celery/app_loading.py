"""Finding the Celery app to send through: the user's own (``proj.celery:app``) or a bare one.

A bare app made from a broker URL is enough to send: ``send_task`` needs only the task's name,
not its code, so the scheduler process does not have to import the user's tasks.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from parallel_scheduler.errors import ConfigurationError

__all__ = ["app_for_broker", "load_app"]


def load_app(spec: str) -> Any:
    """The Celery app named by ``module`` or ``module:attribute`` (attribute defaults to app)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise ConfigurationError(f"--app {spec!r}: expected module or module:attribute")
    if "" not in sys.path:
        sys.path.insert(0, "")  # like `celery -A`, find the project in the working directory
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from None
    candidates = [attribute] if attribute else ["app", "celery"]
    for name in candidates:
        app = getattr(module, name, None)
        if app is not None and hasattr(app, "send_task"):
            return app
    raise ConfigurationError(f"--app {spec!r}: no Celery app found as {' or '.join(candidates)}")


def app_for_broker(broker_url: str) -> Any:
    """A bare Celery app on ``broker_url`` with JSON messages only: what
    ``parallel-scheduler run --broker-url`` releases jobs through when no project app is named.

    :param broker_url: the broker's URL (``redis://...``, ``amqp://...``).
    :returns: the new ``Celery`` app.
    """
    from celery import Celery

    app = Celery("parallel_scheduler", broker=broker_url)
    app.conf.task_serializer = "json"
    app.conf.accept_content = ["json"]
    return app
