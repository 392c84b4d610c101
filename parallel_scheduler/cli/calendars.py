"""``calendar add|import|list|remove``: named calendars of excluded dates, which recurring jobs
name in ``recurring add --exclude`` (``Client.put_calendar`` and the rest: ``calendars.py``).

A calendar is checked before the store is opened (``checks/calendars.py``, the same words as the
client and the HTTP API), so a bad one is refused with exit status 2 and writes nothing.
``list --json`` gives the answer of ``GET /api/v1/calendars`` (``calendars.calendar_view``).
``remove`` of a calendar recurring jobs still name is allowed: it says how many name it, and they
fire as if it were empty from then on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from parallel_scheduler.calendars import (
    calendar_summary,
    calendar_view,
    date_words,
    parse_dates,
    parse_ics,
    removed_text,
)
from parallel_scheduler.cli.opening import open_client
from parallel_scheduler.cli.render import print_listing
from parallel_scheduler.pausing import pauser
from parallel_scheduler.recurring.excluding import jobs_naming
from storage_adapters import InvalidArgumentError
from storage_adapters.checks.calendars import check_calendar, check_calendar_name

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    group = commands.add_parser(
        "calendar", help="calendars of excluded dates that recurring jobs do not fire on"
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="create a calendar, or replace it whole")
    add.add_argument("name", metavar="NAME")
    add.add_argument(
        "--dates", action="append", default=[], help="ISO dates, separated by commas or spaces"
    )
    add.add_argument(
        "--range", action="append", default=[], dest="ranges", metavar="FIRST..LAST",
        help="an inclusive range of ISO dates (repeatable)",
    )  # fmt: skip
    add.add_argument("--timezone", default="UTC", help="IANA zone of the local dates")
    add.add_argument("--by", help="who sets it (default: user@host)")
    add.set_defaults(handler=cmd_add)
    ics = actions.add_parser("import", help="create or replace a calendar from an .ics file")
    ics.add_argument("name", metavar="NAME")
    ics.add_argument("file", metavar="FILE.ics", type=Path)
    ics.add_argument("--timezone", default="UTC", help="IANA zone of the local dates")
    ics.add_argument("--by", help="who sets it (default: user@host)")
    ics.set_defaults(handler=cmd_import)
    listing = actions.add_parser("list", help="every calendar with its ranges")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)
    remove = actions.add_parser("remove", help="delete a calendar")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=cmd_remove)


def _put(ns: argparse.Namespace, ranges: list[tuple[str, str]]) -> int:
    checked = check_calendar(ns.name, ns.timezone, ranges, pauser(ns.by))
    with open_client(ns) as client:
        stored = client.put_calendar(checked[0], checked[2], checked[1], checked[3])
    print(f"calendar {stored.name!r} saved: {calendar_summary(calendar_view(stored))}")
    return 0


def cmd_add(ns: argparse.Namespace) -> int:
    return _put(ns, parse_dates(date_words(ns.dates), ns.ranges))


def cmd_import(ns: argparse.Namespace) -> int:
    check_calendar(ns.name, ns.timezone, [], "")
    try:
        text = ns.file.read_text(encoding="utf-8")
        ranges = parse_ics(text, ns.timezone)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot import {str(ns.file)!r}: {exc}") from None
    return _put(ns, ranges)


def cmd_list(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        views = [calendar_view(record) for record in client.calendars()]
    if ns.json:
        print(json.dumps(views, indent=2))
        return 0
    print_listing(
        views,
        {
            "calendar": "name",
            "time zone": "timezone",
            "days": "days",
            "ranges": lambda view: ", ".join(
                first if first == last else f"{first}..{last}" for first, last in view["ranges"]
            ),
            "set by": "set_by",
        },
        as_json=False,
    )
    return 0


def cmd_remove(ns: argparse.Namespace) -> int:
    name = check_calendar_name(ns.name)
    with open_client(ns) as client:
        naming = jobs_naming(client.storage, name)
        removed = client.remove_calendar(name)
    print(removed_text(name, removed, naming))
    return 0
