"""The dashboard's health: the red banner on every page, and ``/metrics``.

The banner shows the problems ``process/health.py`` finds (no live scheduler while jobs are due,
lag above the ``lag_alert`` setting, a dead instance still holding a lock, a recurring job
overdue), judged at most once every ``HEALTH_CACHE`` seconds whatever the traffic, so a page
costs storage no more than before. A store that cannot be read says so in the banner too.
``/live/health`` serves the banner alone (``health_slot.html``, the same markup as in every
page), for ``live.js`` to refresh it on every page without reloading it.

``/metrics`` serves the storage-side metrics (``process/storage_metrics.py``) in Prometheus
text, behind the same auth as every page (Prometheus sends it: ``basic_auth`` or
``authorization`` in its scrape config); it is a GET, so read-only mode does not refuse it.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, render_template

from parallel_scheduler.client import Client
from parallel_scheduler.process.health import HealthCache
from parallel_scheduler.process.storage_metrics import storage_registry

__all__ = ["register"]

logger = logging.getLogger(__name__)
_HEALTH = "parallel_scheduler_health"


def _banner(cache: HealthCache) -> dict[str, Any]:
    try:
        problems = [problem.message for problem in cache.problems()]
    except Exception as exc:  # a page must render: the banner says what it could not read
        logger.warning("dashboard: reading health failed: %s", exc)
        problems = [f"health cannot be read from storage: {type(exc).__name__}: {exc}"]
    return {"health_problems": problems}


def register(app: Flask, client: Client) -> None:
    """The banner's figures in every template's context, the banner alone at ``/live/health``,
    and the ``/metrics`` view."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    cache = HealthCache(client)
    registry = storage_registry(client)
    app.extensions[_HEALTH] = cache
    app.context_processor(lambda: _banner(cache))

    def metrics() -> Response:
        return Response(generate_latest(registry), mimetype=None, content_type=CONTENT_TYPE_LATEST)

    def health_fragment() -> Response:
        response = Response(render_template("health_slot.html"), mimetype="text/html")
        response.headers["Cache-Control"] = "no-store"
        return response

    app.add_url_rule("/metrics", "metrics", metrics)
    app.add_url_rule("/live/health", "health_fragment", health_fragment)
