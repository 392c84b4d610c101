"""``queue limit|unlimit`` and ``task limit|unlimit``: put a rate limit on the jobs of a queue or
a task, or take it off (``Client.limit``/``unlimit``; one budget kept in storage, spent by every
scheduler process and shard), and the limits part of ``queue list`` and ``task list``.

A limit is checked before the store is opened (``rate_limits.checked_limit``: the rate's text,
then storage's checks of the numbers, the same words as every other entry point), so a bad one is
refused with exit status 2 and writes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.render import print_listing
from parallel_scheduler.rate_limits import (
    checked_limit,
    limit_name,
    limited_text,
    unlimited_text,
)
from storage_adapters import PauseKind
from storage_adapters.errors import one_line

__all__ = ["add_actions", "print_limits"]


def add_actions(actions: Any, kind: PauseKind, what: str) -> None:
    """``limit`` and ``unlimit`` under ``kind``'s group of commands."""
    limit = actions.add_parser(
        "limit",
        help=f"release {what} at most at a rate, shared by every scheduler (replaces a limit)",
    )
    limit.add_argument("name", metavar="NAME")
    limit.add_argument(
        "--rate", required=True, help="COUNT/UNIT: 100/s, 100/m or 100/h (also /sec, /min, /hour)"
    )
    limit.add_argument(
        "--burst", default="1", help="how many may go at once after a quiet spell (default 1)"
    )
    limit.add_argument("--by", help="who sets it (default: user@host)")
    limit.set_defaults(handler=cmd_limit, kind=kind)
    unlimit = actions.add_parser(
        "unlimit", help="remove the rate limit (jobs waiting for a slot keep it)"
    )
    unlimit.add_argument("name", metavar="NAME")
    unlimit.set_defaults(handler=cmd_unlimit, kind=kind)


def cmd_limit(ns: argparse.Namespace) -> int:
    kind, name, count, period, burst, by = checked_limit(ns.kind, ns.name, ns.rate, ns.burst, ns.by)
    with open_client(ns) as client:
        client.limit(kind, name, ns.rate, burst, by)
    print(limited_text(kind.value, name, count, period, burst))
    return 0


def cmd_unlimit(ns: argparse.Namespace) -> int:
    kind, name = limit_name(ns.kind, ns.name)
    with open_client(ns) as client:
        removed = client.unlimit(kind, name)
    print(unlimited_text(kind.value, name, removed))
    return 0


def print_limits(kind: PauseKind, views: Sequence[dict[str, Any]]) -> None:
    """The limits of one kind in force, as a table after the pauses' (nothing when none)."""
    if not views:
        return
    columns: dict[str, str | Callable[[dict[str, Any]], object]] = {
        f"rate-limited {kind.value}": "name",
        "rate": "rate",
        "burst": "burst",
        "set by": lambda view: one_line(view["set_by"]),
        "since": "set_at",
        "next free": lambda view: view["free_at"] or "now",
    }
    print()
    print_listing(views, columns, as_json=False)
