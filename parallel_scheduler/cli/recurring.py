"""``recurring add|list|show|pause|resume|trigger|remove``: manage recurring (cron or interval)
jobs (``recurring import`` is ``recurring_import.py``).

``recurring list`` shows every stored row, flagging one whose schedule or payload this version
cannot read (see ``render``), so the command that finds a broken recurring job never breaks on it.
``recurring list`` and ``recurring show`` give each job's firings with their outcomes
(``views.with_outcomes``, read in batches, never one read per row). Their ``--json`` is the HTTP
API's shape (``GET /api/v1/recurring``, ``GET /api/v1/recurring/{id}``), made by the same
function; tests/cli/test_cli_recurring_outcomes.py holds the two to one shape.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from parallel_scheduler.calendars import calendar_names
from parallel_scheduler.cli.opening import open_client, read
from parallel_scheduler.cli.options import count_arg, instant_arg, interval_arg, json_arg
from parallel_scheduler.cli.recurring_backfill import add_backfill_command
from parallel_scheduler.cli.recurring_import import add_import_command
from parallel_scheduler.cli.render import print_listing
from parallel_scheduler.pausing import pauser
from parallel_scheduler.recurring.limits import runs_text
from parallel_scheduler.recurring.max_runs import max_runs_arg
from parallel_scheduler.recurring.overlap_policy import DEFAULT_OVERLAP_TIMEOUT, seconds_arg
from parallel_scheduler.timeline import timeline_line
from parallel_scheduler.views import recurring_view, with_outcomes
from storage_adapters.checks.pauses import check_pause_note
from storage_adapters.errors import one_line

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    recurring = commands.add_parser("recurring", help="manage recurring (cron) jobs")
    actions = recurring.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="create a recurring job (--update/--upsert to change)")
    add.add_argument("recurring_id", metavar="ID")
    add.add_argument("task")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", default="", help="5 fields, or 6 with seconds first")
    when.add_argument("--every", type=interval_arg, metavar="SECONDS", help="fixed interval")
    add.add_argument("--timezone", default="UTC", help="IANA name, e.g. Europe/Berlin")
    add.add_argument("--args", type=json_arg(list), default=[], help="JSON list")
    add.add_argument("--kwargs", type=json_arg(dict), default={}, help="JSON object")
    add.add_argument("--start", type=instant_arg, metavar="ISO8601")
    add.add_argument("--end", type=instant_arg, metavar="ISO8601")
    add.add_argument("--misfire", choices=("skip", "run_once", "run_all"), default="run_once")
    add.add_argument("--misfire-cap", type=int, default=100)
    add.add_argument(
        "--jitter", type=float, default=0.0, metavar="SECONDS",
        help="fire each tick up to this late (an offset of the id and tick; below the next tick)",
    )  # fmt: skip
    add.add_argument(
        "--catch-up-window", type=float, metavar="SECONDS",
        help="never fire a tick older than this, whatever the misfire policy",
    )  # fmt: skip
    add.add_argument(
        "--max-runs", type=max_runs_arg, metavar="N",
        help="end the job after N scheduled firings (triggers and backfills do not count)",
    )  # fmt: skip
    add.add_argument(
        "--overlap", default="allow", metavar="allow|skip|buffer_one",
        help="a tick while an earlier firing runs: fire it, skip it, or hold one until it ends",
    )  # fmt: skip
    add.add_argument(
        "--overlap-timeout", type=seconds_arg, default=DEFAULT_OVERLAP_TIMEOUT, metavar="SECONDS",
        help="an unfinished firing counts as finished this long after its tick (default 3600)",
    )  # fmt: skip
    add.add_argument(
        "--pause-after-failures", type=max_runs_arg, metavar="K",
        help="pause the job after K failed firings in a row (1 to 20; needs execution outcomes)",
    )  # fmt: skip
    add.add_argument(
        "--exclude", action="append", default=[], metavar="CALENDAR",
        help="do not fire on the dates of this calendar (repeatable, or a comma list)",
    )  # fmt: skip
    add.add_argument("--queue")
    add.add_argument("--paused", action="store_true", help="create it paused")
    mode = add.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_const", const="update", dest="mode")
    mode.add_argument("--upsert", action="store_const", const="upsert", dest="mode")
    add.set_defaults(handler=cmd_recurring_add, mode="create")

    listing = actions.add_parser(
        "list", help="recurring jobs with their next and last runs and recent firings"
    )
    listing.add_argument("--limit", type=count_arg(1), default=100)
    listing.add_argument("--offset", type=count_arg(0), default=0)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_recurring_list)

    show = actions.add_parser(
        "show", help="one recurring job: its schedule, call, and recent firings with outcomes"
    )
    show.add_argument("recurring_id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_recurring_show)

    for name, help_text in (
        ("pause", "stop firing until resumed"),
        ("resume", "fire again, from the next tick on"),
        ("trigger", "fire once now, outside the schedule"),
        ("remove", "delete the recurring job (its firings stay)"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("recurring_id", metavar="ID")
        action.set_defaults(handler=cmd_recurring_action, note="", by=None)
        if name == "pause":
            action.add_argument("--note", default="", help="why, for whoever sees the pause")
            action.add_argument("--by", help="who pauses it (default: user@host)")
    add_import_command(actions)
    add_backfill_command(actions)


def cmd_recurring_add(ns: argparse.Namespace) -> int:
    options = {"queue": ns.queue} if ns.queue else {}
    with open_client(ns) as client:
        job = client.recurring.save(
            ns.recurring_id, ns.task, ns.cron, every=ns.every, args=ns.args, kwargs=ns.kwargs,
            timezone=ns.timezone, start=ns.start, end=ns.end, misfire_policy=ns.misfire,
            misfire_cap=ns.misfire_cap, jitter=ns.jitter, catch_up_window=ns.catch_up_window,
            max_runs=ns.max_runs, exclude=calendar_names(ns.exclude), overlap=ns.overlap,
            overlap_timeout=ns.overlap_timeout, pause_after_failures=ns.pause_after_failures,
            enabled=not ns.paused, mode=ns.mode, **options,
        )  # fmt: skip
    next_run = job.next_run_at.isoformat() if job.next_run_at else "never"
    print(f"{job.id} saved ({ns.mode}); next run {next_run}")
    return 0


def _schedule_text(view: dict[str, Any]) -> str | None:
    if view["cron"]:
        return str(view["cron"])
    every = view["every"]
    return f"every {every:g} s" if isinstance(every, (int, float)) else None


#: Firings shown per recurring job in the text listing (``--json`` gives every kept one).
RECENT_SHOWN = 3


def _recent_text(view: dict[str, Any]) -> str | None:
    """The newest firings, a trigger's marked ``(triggered)``; ``None`` (shown ``-``) for none."""
    firings = view.get("recent_firings") or []
    shown = [
        f"{firing['job_id']} (triggered)" if firing["trigger"] else str(firing["job_id"])
        for firing in firings[:RECENT_SHOWN]
    ]
    return ", ".join(shown) or None


def _runs_text(view: dict[str, Any]) -> str:
    """The scheduled firings counted, ``3 of 3`` for a job with ``max_runs`` (``limits.py``)."""
    runs, max_runs = view.get("runs"), view.get("max_runs")
    return runs_text(runs if isinstance(runs, int) else 0, max_runs)


def _last_outcome_text(view: dict[str, Any]) -> str | None:
    """The newest firing's latest outcome state; ``None`` (shown ``-``) when there is none."""
    last = view.get("last_outcome")
    return None if last is None else str(last["state"])


def _paused_text(view: dict[str, Any]) -> str | None:
    """A paused job's ``since <when> by <who>: <note>`` on one line; ``None`` (``-``) when it
    is enabled or was paused by a version before pauses carried them."""
    since, by, note = view.get("paused_at"), view.get("paused_by"), view.get("pause_note")
    if since is None:
        return None
    shown = f"since {since} by {one_line(str(by or '')) or '-'}"
    return f"{shown}: {one_line(str(note))}" if note else shown


def _overlap_text(view: dict[str, Any]) -> str | None:
    """A job's overlap policy other than the default ``allow``, with its timeout, e.g.
    ``skip (timeout 3600 s)``; ``None`` (``-``) for ``allow``."""
    overlap = view.get("overlap")
    if overlap in (None, "allow"):
        return None
    timeout = view.get("overlap_timeout")
    shown = f"{timeout:g}" if isinstance(timeout, (int, float)) else one_line(str(timeout))
    return f"{one_line(str(overlap))} (timeout {shown} s)"


def cmd_recurring_list(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        storage = client.storage
        records = read(client, lambda: storage.list_recurring(ns.limit, ns.offset))
        views = with_outcomes(client, [recurring_view(record) for record in records])
    columns: dict[str, str | Callable[[dict[str, Any]], object]] = {
        "id": "id",
        "task": "task",
        "schedule": _schedule_text,
        "time zone": "timezone",
        "enabled": "enabled",
        "paused": _paused_text,
        "next run": "next_run_at",
        "last run": "last_run_at",
        "runs": _runs_text,
        "overlap": _overlap_text,
        "last outcome": _last_outcome_text,
        "recent firings": _recent_text,
        "problem": "problem",
    }
    print_listing(views, columns, as_json=ns.json)
    return 0


def _firing_line(firing: dict[str, Any], outcomes: dict[str, str]) -> str:
    """One recent firing as text: its time, its job, its outcome (``-``: none yet), a trigger's
    ``(triggered)``."""
    job_id = firing.get("job_id")
    parts = [str(firing.get("at") or "-"), one_line(str(job_id or "?"))]
    parts.append(outcomes.get(job_id, "-") if isinstance(job_id, str) else "-")
    if firing.get("trigger"):
        parts.append("(triggered)")
    return "  ".join(parts)


def cmd_recurring_show(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        storage = client.storage
        record = read(client, lambda: storage.get_recurring(ns.recurring_id))
        views = [] if record is None else with_outcomes(client, [recurring_view(record)])
    if not views:
        print(
            f"parallel-scheduler: no such recurring job: {one_line(ns.recurring_id)}",
            file=sys.stderr,
        )
        return 1
    view = views[0]
    if ns.json:
        print(json.dumps(view, indent=2))
        return 0
    firings = view.get("recent_firings") or []
    outcomes = view.get("firing_outcomes") or {}
    last = view.get("last_outcome")
    shown = {
        name: value
        for name, value in view.items()
        if name not in ("recent_firings", "firing_outcomes", "last_outcome")
    }
    if "runs" in shown:
        shown["runs"] = _runs_text(view)  # "3 of 3 (ended)" for a job its max_runs ended
    width = max(len(name) for name in (*shown, "last outcome"))
    for name, value in shown.items():
        if isinstance(value, (list, dict)):
            value = json.dumps(value, ensure_ascii=False)
        print(f"{name:<{width}}  {'-' if value is None else value}")
    outcome = "-" if last is None else f"{last['at']}  {timeline_line(last)}"
    print(f"{'last outcome':<{width}}  {outcome}")
    for firing in firings:  # newest first, one line each, under the one name
        print(f"{'firing':<{width}}  {_firing_line(firing, outcomes)}")
    if not firings:
        print(f"{'firing':<{width}}  none yet")
    return 0


def cmd_recurring_action(ns: argparse.Namespace) -> int:
    """``pause`` checks its note and who before the store is opened (the words of every other
    entry point, exit status 2) and keeps them with the pause."""
    note, by = check_pause_note(ns.note, pauser(ns.by))
    with open_client(ns) as client:
        recurring = client.recurring
        if ns.action == "trigger":
            print(f"{ns.recurring_id} triggered as job {recurring.trigger(ns.recurring_id)}")
            return 0
        acts: dict[str, Callable[[str], bool]] = {
            "pause": partial(recurring.pause, note=note, by=by),
            "resume": recurring.resume,
            "remove": recurring.remove,
        }
        done = acts[ns.action](ns.recurring_id)
    if not done:
        shown = one_line(ns.recurring_id)
        print(f"parallel-scheduler: {shown}: no such recurring job", file=sys.stderr)
        return 1
    past = {"pause": "paused", "resume": "resumed", "remove": "removed"}[ns.action]
    print(f"{ns.recurring_id} {past}")
    return 0
