"""``recurring backfill ID --from T1 --to T2``: fire every tick of a past range of a recurring
job once (``RecurringJobs.backfill``); run again, it creates nothing new. ``--overlap skip``
fires only the latest tick (none while a firing of the job runs); ``--overlap buffer_one`` fires
the ticks one after another, each once the one before has finished, and waits for that."""

from __future__ import annotations

import argparse
import json
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.options import instant_arg

__all__ = ["add_backfill_command"]


def add_backfill_command(actions: Any) -> None:
    """``recurring backfill`` under the ``recurring`` command's actions."""
    command = actions.add_parser(
        "backfill",
        help="fire every tick of a past range once (a second run creates nothing)",
    )
    command.add_argument("recurring_id", metavar="ID")
    command.add_argument(
        "--from", dest="start", type=instant_arg, required=True, metavar="ISO8601",
        help="the first instant of the range, included",
    )  # fmt: skip
    command.add_argument(
        "--to", dest="end", type=instant_arg, required=True, metavar="ISO8601",
        help="the last instant of the range, included (not in the future)",
    )  # fmt: skip
    command.add_argument(
        "--overlap", default="allow", metavar="allow|skip|buffer_one",
        help="allow: every tick at once; skip: only the latest, none while a firing runs; "
        "buffer_one: one after another, each once the one before has finished (waits)",
    )  # fmt: skip
    command.add_argument("--json", action="store_true", help="print {ticks, created, existing}")
    command.set_defaults(handler=cmd_recurring_backfill)


def cmd_recurring_backfill(ns: argparse.Namespace) -> int:
    with open_client(ns) as client:
        done = client.recurring.backfill(ns.recurring_id, ns.start, ns.end, ns.overlap)
    if ns.json:
        print(json.dumps(done.to_dict()))
    else:
        print(
            f"{ns.recurring_id}: from {ns.start.isoformat()} to {ns.end.isoformat()}: "
            f"{done.summary()}"
        )
    return 0
