"""``status``: the status report (``process/status_report.py``) as text or JSON, and with
``--check`` the health judgement (``process/health.py``) for probes and cron.

``status --check [--max-lag SECONDS]`` exits 0 when healthy, 1 when not, printing one line per
problem, and 2 on an error (storage unreachable, bad input: ``main`` says it in one line, as for
every command). ``--max-lag`` defaults to the ``lag_alert`` setting. With ``--json`` the problems
are the report's ``problems`` (a list of ``{"kind", "message"}``), in both modes.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.options import add_max_lag
from parallel_scheduler.cli.pauses import print_pauses
from parallel_scheduler.cli.render import print_table
from parallel_scheduler.cli.schedulers import print_schedulers
from parallel_scheduler.process.health import Problem
from parallel_scheduler.views import judged_status

__all__ = ["add_commands", "due_text"]


def add_commands(commands: Any) -> None:
    status = commands.add_parser("status", help="counts per state, next due job, lock holders")
    status.add_argument("--json", action="store_true")
    status.add_argument(
        "--check",
        action="store_true",
        help="judge health for a probe or cron: exit 0 healthy, 1 with one line per problem "
        "(no live scheduler while jobs are due, lag above --max-lag, a dead instance holding "
        "a lock, a recurring job overdue), 2 on error",
    )
    add_max_lag(status, "the lag --check allows (default: the lag_alert setting, 60 s unless set)")
    status.set_defaults(handler=cmd_status)


def due_text(at: str | None, in_seconds: float | None) -> str:
    """``2026-…`` with ``(in 12 s)`` or ``(overdue by 18 s)``; ``-`` for nothing due."""
    if at is None:
        return "-"
    if in_seconds is None:
        return at
    if in_seconds < 0:
        return f"{at} (overdue by {-in_seconds:.0f} s)"
    return f"{at} (in {in_seconds:.0f} s)"


def cmd_status(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        report, problems = judged_status(client, ns.max_lag)
    if ns.json:
        print(json.dumps(report, indent=2))
    elif ns.check:
        _print_check(problems)
    else:
        _print_report(report, problems)
    if not ns.check:
        return 0
    if any(problem.kind == "unreadable" for problem in problems):
        return 2  # health cannot be told: an error, not a verdict
    return 1 if problems else 0


def _print_check(problems: list[Problem]) -> None:
    if not problems:
        print("healthy")
    for problem in problems:
        print(f"unhealthy: {problem.message}")


def _print_report(report: dict[str, Any], problems: list[Problem]) -> None:
    print(f"storage: {report['storage']}")
    print_table(("state", "jobs"), list(report["counts"].items()))
    print(f"next due: {due_text(report['next_due_at'], report['next_due_in_seconds'])}")
    holder = report["lock_holder"]
    shown = "none" if holder is None else f"{holder['owner']} (token {holder['token']})"
    print(f"lock holder: {shown}")
    print(f"recurring lock holder: {report['recurring_lock_holder'] or 'none'}")
    print(f"recurring jobs: {report['recurring_jobs']}")
    next_run = due_text(report["next_recurring_at"], report["next_recurring_in_seconds"])
    print(f"next recurring run: {next_run}")
    print_pauses(report["pauses"])
    print_schedulers(report["schedulers"])
    if report["problem"]:
        print(f"problem: {report['problem']}")
    for problem in problems:
        print(f"unhealthy: {problem.message}")
