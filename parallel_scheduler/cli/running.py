"""``run`` (the scheduler process), ``setup``, ``demo`` and ``profile``.

``run`` takes every setting as an option (derived from ``Settings``, see ``options``), and
``run --once`` prints the settings its pass ran with next to the pass's stats. A pass that could
not send a job exits 1 and says how many jobs stayed due, so a cron job or a health check that
runs ``--once`` notices a broken broker.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.options import GLOBAL_SETTINGS, add_setting_options, overrides
from parallel_scheduler.log_format import LOG_FORMATS, configure_logging
from parallel_scheduler.process.one_pass import run_one_pass
from parallel_scheduler.process.startup import log_start
from parallel_scheduler.settings import RELEASE_MODES, SETTING_KINDS

__all__ = ["add_commands"]

logger = logging.getLogger(__name__)


def add_commands(commands: Any) -> None:
    run = commands.add_parser("run", help="run the scheduler process")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--app", help="Celery app to send through, as module:attribute")
    source.add_argument("--broker-url", help="send through a bare Celery app on this broker")
    run.add_argument(
        "--once",
        action="store_true",
        help="run one pass, print its settings and stats, exit 1 if a job could not be sent",
    )
    add_setting_options(
        run, [kind.name for kind in SETTING_KINDS if kind.name not in GLOBAL_SETTINGS]
    )
    run.add_argument(  # also after ``run``; left out, the global option's value stands
        "--log-format", choices=LOG_FORMATS, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    run.set_defaults(handler=cmd_run)

    setup = commands.add_parser("setup", help="create or upgrade the storage schema")
    setup.set_defaults(handler=cmd_setup)

    demo = commands.add_parser(
        "demo", help="the embedded demo: a real Celery worker, every job executed once"
    )
    demo.add_argument("--jobs", type=int, default=10_000)
    demo.add_argument("--spread", type=float, default=10.0, help="seconds over which jobs fall due")
    demo.add_argument("--max-degree-of-parallelism", type=int, default=4)
    demo.add_argument("--batch-size", type=int, default=1000)
    demo.add_argument(
        "--release-mode", choices=RELEASE_MODES, help="default: the release_mode setting's"
    )
    demo.add_argument(
        "--broker",
        choices=("auto", "redis", "filesystem"),  # demo.brokers.BROKER_CHOICES, imported late
        default="auto",
        help="auto (default): the demo's own throwaway redis-server as broker and storage when "
        "one is installed (the default fast path), else SQLite and a filesystem broker",
    )
    demo.add_argument("--workdir", help="where the demo keeps its files (default: a temp dir)")
    demo.set_defaults(handler=cmd_demo)

    profile = commands.add_parser(
        "profile", help="sweep batch size x parallelism, verified; table, JSON and PNG"
    )
    from parallel_scheduler.profiling import add_arguments as add_profile_arguments

    add_profile_arguments(profile)
    profile.set_defaults(handler=cmd_profile)


def cmd_run(ns: argparse.Namespace) -> int:
    from parallel_scheduler.celery import CeleryIntegration, app_for_broker, load_app

    app = load_app(ns.app) if ns.app else app_for_broker(ns.broker_url)
    integration = CeleryIntegration(app, overrides(ns))
    # the Celery app's configuration may name a format the command line did not
    configure_logging(ns.log_level, integration.settings.log_format)
    service = integration.make_service()
    try:
        log_start(service)  # names the store, the instance and the settings in one line
        if ns.once:
            return run_one_pass(service)
        ran_to_a_stop = service.run()
    finally:
        service.close()
    return 0 if ran_to_a_stop else 1


def cmd_setup(ns: argparse.Namespace) -> int:
    with open_client(ns) as client:
        print(f"schema ready in {client.storage!r}")
    return 0


def cmd_demo(ns: argparse.Namespace) -> int:
    from parallel_scheduler.demo import run_demo

    return run_demo(
        jobs=ns.jobs,
        spread=ns.spread,
        max_degree_of_parallelism=ns.max_degree_of_parallelism,
        batch_size=ns.batch_size,
        release_mode=ns.release_mode,
        broker=ns.broker,
        workdir=ns.workdir,
    )


def cmd_profile(ns: argparse.Namespace) -> int:
    from parallel_scheduler.profiling import run_from_namespace

    return run_from_namespace(ns)
