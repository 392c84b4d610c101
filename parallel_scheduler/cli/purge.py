"""``purge``: delete finished jobs by hand, as the scheduler's retention does between passes.

``--older-than`` defaults to the ``retention`` setting; the states default to every finished one
(enqueued, cancelled, expired). Scheduled and claimed jobs are never purged: naming their state
is refused before the store is opened. The purge runs in bounded batches (``--batch``), each one
short statement or script, until no job finished before the cutoff is left; the cutoff is fixed
when the command starts, so jobs finishing meanwhile never keep it going.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from parallel_scheduler.cli.opening import open_client, read
from parallel_scheduler.cli.options import count_arg, seconds_arg
from parallel_scheduler.client import Client
from parallel_scheduler.errors import ConfigurationError
from storage_adapters import JobState
from storage_adapters.checks.retention import PURGEABLE_STATES, check_purge

__all__ = ["DEFAULT_BATCH", "add_commands"]

DEFAULT_BATCH = 1000


def add_commands(commands: Any) -> None:
    purge = commands.add_parser(
        "purge", help="delete finished jobs older than the retention (or --older-than)"
    )
    purge.add_argument(
        "--older-than",
        type=seconds_arg,
        metavar="SECONDS",
        help="delete jobs that finished more than SECONDS ago (default: the retention setting)",
    )
    purge.add_argument(
        "--state",
        action="append",
        metavar="STATE",
        help="a finished state to purge: enqueued, cancelled or expired (repeat for several; "
        "default: all three)",
    )
    purge.add_argument(
        "--batch",
        type=count_arg(1),
        default=DEFAULT_BATCH,
        help=f"jobs deleted per statement (default {DEFAULT_BATCH})",
    )
    purge.add_argument("--json", action="store_true", help="print {deleted: {state: n}, ...}")
    purge.set_defaults(handler=cmd_purge)


def cmd_purge(ns: argparse.Namespace) -> int:
    # checked before the store is opened: a refused state deletes nothing and opens nothing
    states, _, batch = check_purge(ns.state or PURGEABLE_STATES, 0.0, ns.batch)
    with open_client(ns) as client:
        older_than = ns.older_than
        if older_than is None:
            older_than = client.settings.retention
            if not older_than:
                raise ConfigurationError(
                    "retention is 0 (keep every job) and no --older-than was given: "
                    "pass --older-than SECONDS to say which jobs to delete"
                )
        cutoff = read(client, client.storage.now) - older_than
        deleted = {state.value: _purge_state(client, state, cutoff, batch) for state in states}
    total = sum(deleted.values())
    if ns.json:
        print(json.dumps({"older_than_seconds": older_than, "deleted": deleted, "total": total}))
    else:
        for state, count in deleted.items():
            print(f"{state}: {count} deleted")
        print(f"{total} finished job(s) older than {older_than:g} s deleted")
    return 0


def _purge_state(client: Client, state: JobState, cutoff: float, batch: int) -> int:
    """Bounded batches of one state until a batch comes back short: none is left."""
    deleted = 0
    while True:
        count = read(client, lambda: client.storage.purge_finished([state], cutoff, batch))
        deleted += count
        if count < batch:
            return deleted
