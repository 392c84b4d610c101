"""``queue pause|resume|list`` and ``task pause|resume|list``: stop releasing the jobs of a queue
or a task, and start again (``Client.pause``/``resume``; every scheduler process obeys, since the
pause is kept in storage); ``limit`` and ``unlimit`` (rate limits) are in ``limits``.

A pause is checked before the store is opened (``checks/pauses.py``, the same words as every
other entry point), so a bad one is refused with exit status 2 and writes nothing. ``list`` shows
the pauses, then the rate limits, of one kind; ``list --json`` gives ``{"pauses": [...],
"limits": [...]}``, the answers of ``GET /api/v1/pauses`` and ``GET /api/v1/limits``
(``pausing.pause_view``, ``rate_limits.limit_view``) for one kind.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from parallel_scheduler.cli import limits
from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.render import print_listing
from parallel_scheduler.pausing import pause_view, paused_text, pauser, resumed_text
from parallel_scheduler.rate_limits import limit_view
from storage_adapters import PauseKind
from storage_adapters.checks.pauses import check_pause, check_pause_name
from storage_adapters.errors import one_line

__all__ = ["add_commands", "print_pauses"]


def add_commands(commands: Any) -> None:
    for kind, what in ((PauseKind.QUEUE, "the jobs sent to a queue"), (PauseKind.TASK, "a task")):
        group = commands.add_parser(kind.value, help=f"pause, resume or rate-limit {what}")
        actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
        pause = actions.add_parser(
            "pause", help=f"hold {what} (their due times kept) until resumed"
        )
        pause.add_argument("name", metavar="NAME")
        pause.add_argument("--note", default="", help="why, for whoever sees the pause")
        pause.add_argument("--by", help="who pauses it (default: user@host)")
        pause.set_defaults(handler=cmd_pause, kind=kind)
        resume = actions.add_parser("resume", help="release the held jobs again, in due order")
        resume.add_argument("name", metavar="NAME")
        resume.set_defaults(handler=cmd_resume, kind=kind)
        limits.add_actions(actions, kind, what)
        listing = actions.add_parser(
            "list", help=f"the {kind.value} pauses and rate limits in force"
        )
        listing.add_argument("--json", action="store_true")
        listing.set_defaults(handler=cmd_list, kind=kind)


def cmd_pause(ns: argparse.Namespace) -> int:
    kind, name, note, by = check_pause(ns.kind, ns.name, ns.note, pauser(ns.by))
    with open_client(ns) as client:
        held = client.pause(kind, name, note, by)
    print(paused_text(kind.value, name, held))
    return 0


def cmd_resume(ns: argparse.Namespace) -> int:
    kind, name = check_pause_name(ns.kind, ns.name)
    with open_client(ns) as client:
        was_paused = any((p.kind, p.name) == (kind, name) for p in client.pauses())
        released = client.resume(kind, name)
    print(resumed_text(kind.value, name, released, was_paused))
    return 0


def cmd_list(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        views = [pause_view(pause) for pause in client.pauses() if pause.kind is ns.kind]
        limited = [limit_view(limit) for limit in client.rate_limits() if limit.kind is ns.kind]
    if ns.json:
        print(json.dumps({"pauses": views, "limits": limited}, indent=2))
        return 0
    columns: dict[str, str | Callable[[dict[str, Any]], object]] = {
        ns.kind.value: "name",
        "note": lambda view: one_line(view["note"]),
        "paused by": lambda view: one_line(view["paused_by"]),
        "since": "paused_at",
    }
    print_listing(views, columns, as_json=False)
    limits.print_limits(ns.kind, limited)
    return 0


def print_pauses(views: Sequence[dict[str, Any]]) -> None:
    """The status report's pauses, one line each (``pauses: none`` when none is in force)."""
    if not views:
        print("pauses: none")
    for view in views:
        note = f": {one_line(view['note'])}" if view["note"] else ""
        by = one_line(view["paused_by"]) or "-"
        print(f"paused: {view['kind']} {view['name']!r} by {by} since {view['paused_at']}{note}")
