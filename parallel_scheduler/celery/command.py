"""``celery -A proj parallel-scheduler``: the scheduler as its own process, via Celery's CLI.

Registered through the ``celery.commands`` entry point, so it appears in ``celery --help`` once
the package is installed. ``parallel-scheduler run --app proj:app`` runs the same scheduler.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from ..one_pass import run_one_pass
from .integration import get_integration

__all__ = ["parallel_scheduler"]


@click.command(name="parallel-scheduler")
@click.option(
    "--once", is_flag=True, help="Run one pass, print its stats, exit 1 if a job could not be sent."
)
@click.pass_context
def parallel_scheduler(ctx: click.Context, once: bool) -> None:
    """Fire recurring jobs and release due jobs into this app's broker (until SIGINT/SIGTERM)."""
    if not logging.getLogger().handlers:  # Celery sets up logging for workers, not for commands
        logging.basicConfig(level=logging.INFO, format="[%(asctime)s: %(levelname)s] %(message)s")
    app: Any = ctx.obj.app
    service = get_integration(app).make_service()
    try:
        if once:
            ctx.exit(run_one_pass(service))
        service.run()
    finally:
        service.close()
