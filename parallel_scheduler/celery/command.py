"""``celery -A proj parallel-scheduler``: the scheduler as its own process, via Celery's CLI.

Registered through the ``celery.commands`` entry point, so it appears in ``celery --help`` once
the package is installed. ``parallel-scheduler run --app proj:app`` runs the same scheduler.
"""

from __future__ import annotations

from typing import Any

import click
from celery.bin.base import LOG_LEVEL

from parallel_scheduler.celery.integration import get_integration
from parallel_scheduler.log_format import configure_logging
from parallel_scheduler.process.one_pass import run_one_pass
from parallel_scheduler.process.startup import log_start

__all__ = ["parallel_scheduler"]


@click.command(name="parallel-scheduler")
@click.option(
    "--once", is_flag=True, help="Run one pass, print its stats, exit 1 if a job could not be sent."
)
@click.option(
    "-l",
    "--loglevel",
    type=LOG_LEVEL,
    default="INFO",
    help="Logging level, as for celery worker (DEBUG, INFO, WARNING, ERROR, CRITICAL).",
)
@click.pass_context
def parallel_scheduler(ctx: click.Context, once: bool, loglevel: int) -> None:
    """Fire recurring jobs and release due jobs into this app's broker (until SIGINT/SIGTERM)."""
    app: Any = ctx.obj.app
    integration = get_integration(app)
    # Celery sets up logging for workers, not for commands: this process logs like
    # ``parallel-scheduler run`` does, in the format the settings name
    configure_logging(loglevel, integration.settings.log_format)
    service = integration.make_service()
    try:
        log_start(service)
        if once:
            ctx.exit(run_one_pass(service))
        ran_to_a_stop = service.run()
    finally:
        service.close()
    if not ran_to_a_stop:  # a loop thread died: exit non-zero so a supervisor restarts it
        ctx.exit(1)
