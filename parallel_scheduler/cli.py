"""The ``parallel-scheduler`` command: run the scheduler, manage jobs, show status, run the demo.

Settings come from the options here, then ``PARALLEL_SCHEDULER_*`` variables, then defaults (see
``settings.py``). Every error is one line naming the problem, with credentials masked, and exit
status 2; nothing is half-written.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.table import Table

import storage_adapters
from storage_adapters import StorageError, mask_url

from .client import Client
from .delayed import DelayedJobScheduler
from .errors import ParallelSchedulerError
from .recurring import RecurringJobScheduler
from .settings import RELEASE_MODES, Settings

__all__ = ["main"]

console = Console()
#: A person waiting at a prompt wants an answer soon, not 30 s of silent retries.
INTERACTIVE_RETRY_SECONDS = 3.0


def _json_arg(kind: type) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
        if not isinstance(value, kind):
            raise argparse.ArgumentTypeError(f"must be a JSON {kind.__name__}")
        return value

    return parse


def _finite_seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be finite and >= 0")
    return value


def _aware_datetime(raw: str) -> datetime:
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} has no time zone (add +00:00 or Z)")
    return moment


def _settings_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-degree-of-parallelism", type=int, metavar="N")
    parser.add_argument("--batch-size", type=int, metavar="N")
    parser.add_argument("--poll-interval", type=float, metavar="SECONDS")
    parser.add_argument("--lock-lease", type=float, metavar="SECONDS")
    parser.add_argument("--release-mode", choices=RELEASE_MODES)
    parser.add_argument(
        "--fast-publish",
        action="store_const",
        const=True,
        help="Redis broker: one round trip per chunk instead of send_task per job",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parallel-scheduler",
        description="Durable, parallel delayed job scheduling for Celery.",
    )
    parser.add_argument(
        "--storage-url",
        help="sqlite:///file.db (default), postgresql://…, redis://… "
        "[env PARALLEL_SCHEDULER_STORAGE_URL]",
    )
    parser.add_argument("--prefix", help="table/key prefix [env PARALLEL_SCHEDULER_PREFIX]")
    parser.add_argument("--log-level", default="INFO")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the scheduler process")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--app", help="Celery app to send through, as module:attribute")
    source.add_argument("--broker-url", help="send through a bare Celery app on this broker")
    run.add_argument("--once", action="store_true", help="run one pass, print its stats, exit")
    _settings_options(run)
    run.set_defaults(handler=cmd_run)

    schedule = commands.add_parser("schedule", help="schedule one job")
    schedule.add_argument("task")
    schedule.add_argument("--args", type=_json_arg(list), default=[], help="JSON list")
    schedule.add_argument("--kwargs", type=_json_arg(dict), default={}, help="JSON object")
    when = schedule.add_mutually_exclusive_group()
    when.add_argument("--countdown", type=_finite_seconds, metavar="SECONDS")
    when.add_argument("--eta", type=_aware_datetime, metavar="ISO8601")
    schedule.add_argument("--id", dest="job_id")
    schedule.add_argument("--queue")
    schedule.add_argument("--routing-key")
    schedule.add_argument("--priority", type=int)
    schedule.set_defaults(handler=cmd_schedule)

    listing = commands.add_parser("list", help="list jobs")
    listing.add_argument("--state", help="scheduled, claimed, enqueued, cancelled or expired")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)

    cancel = commands.add_parser("cancel", help="cancel scheduled jobs")
    cancel.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    cancel.set_defaults(handler=cmd_cancel)

    status = commands.add_parser("status", help="counts per state, next due job, lock holder")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=cmd_status)

    _recurring_commands(commands)

    setup = commands.add_parser("setup", help="create or upgrade the storage schema")
    setup.set_defaults(handler=cmd_setup)

    demo = commands.add_parser("demo", help="the embedded demo: SQLite + a real Celery worker")
    demo.add_argument("--jobs", type=int, default=10_000)
    demo.add_argument("--spread", type=float, default=10.0, help="seconds over which jobs fall due")
    demo.add_argument("--max-degree-of-parallelism", type=int, default=4)
    demo.add_argument("--batch-size", type=int, default=1000)
    demo.add_argument("--release-mode", choices=RELEASE_MODES, default="batch")
    demo.add_argument("--workdir", help="where the demo keeps its files (default: a temp dir)")
    demo.set_defaults(handler=cmd_demo)

    profile = commands.add_parser(
        "profile", help="sweep batch size x parallelism, verified; table, JSON and PNG"
    )
    from .profiling import add_arguments as add_profile_arguments

    add_profile_arguments(profile)
    profile.set_defaults(handler=cmd_profile)
    return parser


def _recurring_commands(commands: Any) -> None:
    recurring = commands.add_parser("recurring", help="manage recurring (cron) jobs")
    actions = recurring.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="create a recurring job (--update/--upsert to change)")
    add.add_argument("recurring_id", metavar="ID")
    add.add_argument("task")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", default="", help="5 fields, or 6 with seconds first")
    when.add_argument("--every", type=_finite_seconds, metavar="SECONDS", help="fixed interval")
    add.add_argument("--timezone", default="UTC", help="IANA name, e.g. Europe/Berlin")
    add.add_argument("--args", type=_json_arg(list), default=[], help="JSON list")
    add.add_argument("--kwargs", type=_json_arg(dict), default={}, help="JSON object")
    add.add_argument("--start", type=_aware_datetime, metavar="ISO8601")
    add.add_argument("--end", type=_aware_datetime, metavar="ISO8601")
    add.add_argument("--misfire", choices=("skip", "run_once", "run_all"), default="run_once")
    add.add_argument("--misfire-cap", type=int, default=100)
    add.add_argument("--queue")
    add.add_argument("--paused", action="store_true", help="create it paused")
    mode = add.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_const", const="update", dest="mode")
    mode.add_argument("--upsert", action="store_const", const="upsert", dest="mode")
    add.set_defaults(handler=cmd_recurring_add, mode="create")
    listing = actions.add_parser("list", help="recurring jobs with their next runs")
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_recurring_list)
    for name, help_text in (
        ("pause", "stop firing until resumed"),
        ("resume", "fire again, from the next tick on"),
        ("trigger", "fire once now, outside the schedule"),
        ("remove", "delete the recurring job (its firings stay)"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("recurring_id", metavar="ID")
        action.set_defaults(handler=cmd_recurring_action)


def cmd_recurring_add(ns: argparse.Namespace) -> int:
    options = {"queue": ns.queue} if ns.queue else {}
    with _client(ns) as client:
        job = client.recurring.save(
            ns.recurring_id, ns.task, ns.cron, every=ns.every, args=ns.args, kwargs=ns.kwargs,
            timezone=ns.timezone, start=ns.start, end=ns.end, misfire_policy=ns.misfire,
            misfire_cap=ns.misfire_cap, enabled=not ns.paused, mode=ns.mode, **options,
        )  # fmt: skip
    next_run = job.next_run_at.isoformat() if job.next_run_at else "never"
    console.print(f"{job.id} saved ({ns.mode}); next run {next_run}")
    return 0


def cmd_recurring_list(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        jobs = client.recurring.list(limit=ns.limit, offset=ns.offset)
    if ns.json:
        print(json.dumps([job.to_dict() for job in jobs], indent=2))
        return 0
    table = Table("id", "task", "cron", "time zone", "enabled", "next run", "last run")
    for job in jobs:
        table.add_row(
            job.id, job.task, job.schedule.cron or f"every {job.schedule.every:g} s",
            job.schedule.timezone, str(job.enabled),
            job.next_run_at.isoformat() if job.next_run_at else "-",
            job.last_run_at.isoformat() if job.last_run_at else "-",
        )  # fmt: skip
    console.print(table)
    return 0


def cmd_recurring_action(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        recurring = client.recurring
        if ns.action == "trigger":
            console.print(
                f"{ns.recurring_id} triggered as job {recurring.trigger(ns.recurring_id)}"
            )
            return 0
        done = {"pause": recurring.pause, "resume": recurring.resume, "remove": recurring.remove}[
            ns.action
        ](ns.recurring_id)
    if not done:
        console.print(f"{ns.recurring_id}: no such recurring job", style="yellow")
        return 1
    console.print(
        f"{ns.recurring_id} {ns.action}d" if ns.action != "pause" else f"{ns.recurring_id} paused"
    )
    return 0


_SETTING_OPTIONS = (
    "storage_url",
    "prefix",
    "max_degree_of_parallelism",
    "batch_size",
    "poll_interval",
    "lock_lease",
    "release_mode",
)


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    return {n: getattr(ns, n) for n in _SETTING_OPTIONS if getattr(ns, n, None) is not None}


def _settings(ns: argparse.Namespace, celery_conf: Any = None) -> Settings:
    return Settings.load(_overrides(ns), celery_conf=celery_conf)


def _client(ns: argparse.Namespace) -> Client:
    client = Client(settings=_settings(ns), retry_for=INTERACTIVE_RETRY_SECONDS)
    client.setup()
    return client


def cmd_setup(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        console.print(f"schema ready in {client.storage!r}")
    return 0


def cmd_run(ns: argparse.Namespace) -> int:
    from .celery import CeleryIntegration, app_for_broker, load_app

    app = load_app(ns.app) if ns.app else app_for_broker(ns.broker_url)
    integration = CeleryIntegration(app, _overrides(ns))
    service = integration.make_service()
    try:
        logging.getLogger("parallel_scheduler").info(
            "scheduler %s starting with %s", service.owner, integration.settings.describe()
        )
        if ns.once:
            recurring = service.recurring.run_once().as_dict()
            delayed = service.delayed.run_once().as_dict()
            console.print_json(json.dumps({"recurring": recurring, "delayed": delayed}))
        else:
            service.run()
    finally:
        service.close()
    return 0


def cmd_schedule(ns: argparse.Namespace) -> int:
    options = {
        k: v
        for k, v in (
            ("queue", ns.queue),
            ("routing_key", ns.routing_key),
            ("priority", ns.priority),
        )
        if v is not None
    }
    with _client(ns) as client:
        result = client.schedule(
            ns.task, ns.args, ns.kwargs, eta=ns.eta, countdown=ns.countdown, job_id=ns.job_id,
            **options,
        )  # fmt: skip
    word = "scheduled" if result.created else "already exists (unchanged)"
    console.print(f"{result.job_id} {word}, due {result.due_at.isoformat()}")
    return 0


def cmd_list(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        jobs = client.list(ns.state, limit=ns.limit, offset=ns.offset)
    if ns.json:
        print(json.dumps([job.to_dict() for job in jobs], indent=2))
        return 0
    table = Table("id", "task", "state", "due", "attempts", "last error")
    for job in jobs:
        table.add_row(
            job.id, job.task, job.state.value, job.due_at.isoformat(), str(job.attempts),
            job.last_error or "",
        )  # fmt: skip
    console.print(table)
    return 0


def cmd_cancel(ns: argparse.Namespace) -> int:
    missing = 0
    with _client(ns) as client:
        for job_id in ns.job_ids:
            if client.cancel(job_id):
                console.print(f"{job_id} cancelled")
            else:
                missing += 1
                console.print(f"{job_id} not cancelled: no such scheduled job", style="yellow")
    return 1 if missing else 0


def status_report(client: Client) -> dict[str, Any]:
    storage = client.storage
    holder = storage.lock_holder(DelayedJobScheduler.LOCK_NAME)
    recurring_holder = storage.lock_holder(RecurringJobScheduler.LOCK_NAME)
    next_due = storage.next_due_at()
    now = storage.now()
    return {
        "storage": mask_url(client.settings.storage_url or storage_adapters.DEFAULT_URL),
        "counts": client.counts(),
        "next_due_at": None if next_due is None else _iso(next_due),
        "next_due_in_seconds": None if next_due is None else round(next_due - now, 3),
        "lock_holder": None
        if holder is None
        else {
            "owner": holder.owner,
            "token": holder.token,
            "expires_in_seconds": round(holder.expires_at - now, 3),
        },
        "recurring_jobs": storage.count_recurring(),
        "recurring_lock_holder": None if recurring_holder is None else recurring_holder.owner,
        "settings": client.settings.describe(),
    }


def cmd_status(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        report = status_report(client)
    if ns.json:
        print(json.dumps(report, indent=2))
        return 0
    table = Table("state", "jobs", title=f"parallel-scheduler on {report['storage']}")
    for state, count in report["counts"].items():
        table.add_row(state, str(count))
    console.print(table)
    console.print(f"next due: {report['next_due_at'] or '-'}")
    holder = report["lock_holder"]
    console.print(
        "lock holder: "
        + ("none" if holder is None else f"{holder['owner']} (token {holder['token']})")
    )
    return 0


def cmd_demo(ns: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(
        jobs=ns.jobs,
        spread=ns.spread,
        max_degree_of_parallelism=ns.max_degree_of_parallelism,
        batch_size=ns.batch_size,
        release_mode=ns.release_mode,
        workdir=ns.workdir,
    )


def cmd_profile(ns: argparse.Namespace) -> int:
    from .profiling import run_from_namespace

    return run_from_namespace(ns)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    logging.basicConfig(
        level=ns.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(ns.handler(ns))
    except (ParallelSchedulerError, StorageError, ValueError) as exc:
        message = str(exc)
        if ns.storage_url:
            message = message.replace(ns.storage_url, mask_url(ns.storage_url))
        print(f"parallel-scheduler: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
