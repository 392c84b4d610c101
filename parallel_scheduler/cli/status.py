"""``status``: the status report (``process/status_report.py``) as text or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.render import print_table
from parallel_scheduler.cli.schedulers import print_schedulers
from parallel_scheduler.process.status_report import status_report

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    status = commands.add_parser("status", help="counts per state, next due job, lock holders")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=cmd_status)


def cmd_status(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        report = status_report(client)
    if ns.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"storage: {report['storage']}")
    print_table(("state", "jobs"), list(report["counts"].items()))
    print(f"next due: {report['next_due_at'] or '-'}")
    holder = report["lock_holder"]
    shown = "none" if holder is None else f"{holder['owner']} (token {holder['token']})"
    print(f"lock holder: {shown}")
    print(f"recurring lock holder: {report['recurring_lock_holder'] or 'none'}")
    print(f"recurring jobs: {report['recurring_jobs']}")
    print_schedulers(report["schedulers"])
    if report["problem"]:
        print(f"problem: {report['problem']}")
    return 0
