"""The ``parallel-scheduler`` command: run the scheduler, manage jobs, show status, run the demo.

Settings come from the options here, then ``PARALLEL_SCHEDULER_*`` variables, then the Celery
app's configuration (``run --app``), then defaults (see ``settings.py``). Every error is one line
``parallel-scheduler: error: …`` naming the problem, with credentials masked, and exit status 2;
nothing is half-written. Every command names the store it opened on stderr.

One module per group of commands: ``jobs`` (schedule, show, reschedule, list, cancel),
``status``, ``recurring``, ``pauses`` (queue and task pause, resume, list), ``calendars``
(calendars of excluded dates), ``running`` (run, setup, demo, profile), ``purge``,
``dashboard``, ``exporter``;
``options`` holds the argument types and the settings options, ``opening`` how a store is
opened, ``render`` how rows are shown.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from parallel_scheduler import __version__
from parallel_scheduler.cli import (
    calendars,
    dashboard,
    exporter,
    jobs,
    pauses,
    purge,
    recurring,
    running,
    status,
)
from parallel_scheduler.cli.options import GLOBAL_SETTINGS, add_setting_options
from parallel_scheduler.errors import ParallelSchedulerError
from parallel_scheduler.log_format import LOG_FORMATS, configure_logging, say
from parallel_scheduler.process.status_report import status_report
from parallel_scheduler.settings import SETTING_KINDS
from storage_adapters import mask_url
from storage_adapters.errors import one_line

__all__ = ["build_parser", "main", "status_report"]

logger = logging.getLogger(__name__)
_LOG_FORMAT_ENV = next(kind.env_var for kind in SETTING_KINDS if kind.name == "log_format")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parallel-scheduler",
        description="Durable, parallel delayed job scheduling for Celery.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_setting_options(parser, GLOBAL_SETTINGS)
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        default="INFO",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    running.add_commands(commands)
    jobs.add_commands(commands)
    status.add_commands(commands)
    recurring.add_commands(commands)
    pauses.add_commands(commands)
    calendars.add_commands(commands)
    purge.add_commands(commands)
    dashboard.add_commands(commands)
    exporter.add_commands(commands)
    return parser


def _masked(message: str, ns: argparse.Namespace) -> str:
    """``message`` with every storage URL the command could have used masked."""
    urls = [getattr(ns, "storage_url", None), getattr(ns, "broker_url", None)]
    urls.extend(os.environ.get(kind.env_var) for kind in SETTING_KINDS)
    for url in urls:
        if url and "://" in url:
            message = message.replace(url, mask_url(url))
    return message


def _log_format(ns: argparse.Namespace) -> str:
    """``--log-format``, else its environment variable, else plain. A bad value in the
    environment logs plain here; the command refuses it by name when it loads its settings."""
    fmt = ns.log_format or os.environ.get(_LOG_FORMAT_ENV, "plain").strip()
    return fmt if fmt in LOG_FORMATS else "plain"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    configure_logging(ns.log_level, _log_format(ns))
    try:
        return int(ns.handler(ns))
    except ParallelSchedulerError as exc:
        say(f"parallel-scheduler: error: {one_line(_masked(str(exc), ns))}")
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug, not bad input: one line here, the traceback on DEBUG
        logger.debug("unexpected error", exc_info=True)
        say(
            f"parallel-scheduler: error: unexpected {type(exc).__name__}: "
            f"{one_line(_masked(str(exc), ns))} (--log-level DEBUG shows where)"
        )
        return 2
