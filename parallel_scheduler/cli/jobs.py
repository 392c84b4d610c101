"""The job commands: ``schedule``, ``show``, ``reschedule``, ``list`` and ``cancel``.

Writes go through ``Client`` (which validates); reads show the stored rows through ``render``,
so a row this version cannot decode is shown flagged instead of failing the command.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from parallel_scheduler.cli.opening import open_client, read
from parallel_scheduler.cli.options import count_arg, countdown_arg, instant_arg, json_arg
from parallel_scheduler.cli.render import print_listing
from parallel_scheduler.timeline import read_outcomes, timeline_line
from parallel_scheduler.views import (
    cancel_view,
    job_detail_view,
    job_view,
    reschedule_view,
    schedule_view,
)
from storage_adapters import JobState, list_jobs
from storage_adapters.errors import one_line

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    schedule = commands.add_parser("schedule", help="schedule one job")
    schedule.add_argument("task")
    schedule.add_argument("--args", type=json_arg(list), default=[], help="JSON list")
    schedule.add_argument("--kwargs", type=json_arg(dict), default={}, help="JSON object")
    _when(schedule, required=False)
    schedule.add_argument("--id", dest="job_id", help="job id (idempotency key)")
    schedule.add_argument(
        "--jitter", type=float, metavar="SECONDS",
        help="move the due time later by up to this (an offset of the id and due time)",
    )  # fmt: skip
    schedule.add_argument(
        "--unique-key", metavar="KEY",
        help="at most one scheduled job of the task per key (a held key: see --on-conflict)",
    )  # fmt: skip
    schedule.add_argument(
        "--on-conflict", choices=("keep", "replace"), default="keep",
        help="a held key: keep its job (default) or replace its due time and payload",
    )  # fmt: skip
    schedule.add_argument("--queue")
    schedule.add_argument("--routing-key")
    schedule.add_argument("--priority", type=int)
    schedule.add_argument(
        "--json", action="store_true",
        help="print {id, created, due_at} (with --unique-key also replaced and outcome)",
    )  # fmt: skip
    schedule.set_defaults(handler=cmd_schedule)

    show = commands.add_parser("show", help="one job in full")
    show.add_argument("job_id", metavar="JOB_ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_show)

    reschedule = commands.add_parser(
        "reschedule", help="move a scheduled job's due time, or queue a failed job again"
    )
    reschedule.add_argument("job_id", metavar="JOB_ID")
    _when(reschedule, required=True)
    reschedule.add_argument("--json", action="store_true", help="print {id, rescheduled, due_at}")
    reschedule.set_defaults(handler=cmd_reschedule)

    listing = commands.add_parser("list", help="list jobs, earliest due first")
    listing.add_argument("--state", choices=[state.value for state in JobState])
    listing.add_argument("--limit", type=count_arg(1), default=50)
    listing.add_argument("--offset", type=count_arg(0), default=0)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)

    cancel = commands.add_parser("cancel", help="cancel scheduled jobs")
    cancel.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    cancel.add_argument("--json", action="store_true", help="print [{id, cancelled}]")
    cancel.set_defaults(handler=cmd_cancel)


def _when(parser: argparse.ArgumentParser, *, required: bool) -> None:
    when = parser.add_mutually_exclusive_group(required=required)
    when.add_argument("--countdown", type=countdown_arg, metavar="SECONDS", help="due in N s")
    when.add_argument("--eta", type=instant_arg, metavar="ISO8601", help="due at, with a zone")


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def cmd_schedule(ns: argparse.Namespace) -> int:
    options = {
        name: value
        for name, value in (
            ("queue", ns.queue),
            ("routing_key", ns.routing_key),
            ("priority", ns.priority),
        )
        if value is not None
    }
    with open_client(ns) as client:
        result = client.schedule(
            ns.task, ns.args, ns.kwargs, eta=ns.eta, countdown=ns.countdown, job_id=ns.job_id,
            jitter=ns.jitter, unique_key=ns.unique_key, on_conflict=ns.on_conflict, **options,
        )  # fmt: skip
        due = result.due_at.isoformat()
        if not result.created:  # show what is stored, not the due time this call asked for
            record = read(client, lambda: client.storage.get_job(result.job_id))
            due = due if record is None else str(job_view(record)["due_at"])
    unique = None if ns.unique_key is None else result.replaced
    if ns.json:
        _print_json(schedule_view(result.job_id, result.created, due, unique))
    elif result.created:
        print(f"{result.job_id} scheduled, due {due}")
    elif result.replaced:
        print(f"{result.job_id} holds the unique key: replaced, due {due}")
    elif ns.unique_key is not None:
        print(f"{result.job_id} holds the unique key: kept (unchanged), due {due}")
    else:
        print(f"{result.job_id} already exists (unchanged), due {due}")
    return 0


def _no_such_job(job_id: str) -> int:
    print(f"parallel-scheduler: no such job: {one_line(job_id)}", file=sys.stderr)
    return 1


def cmd_show(ns: argparse.Namespace) -> int:
    with open_client(ns, read_only=True) as client:
        record = read(client, lambda: client.storage.get_job(ns.job_id))
        events = (
            [] if record is None else read(client, lambda: read_outcomes(client.storage, ns.job_id))
        )
    if record is None:
        return _no_such_job(ns.job_id)
    detail = job_detail_view(record, events)
    timeline = detail.pop("timeline")
    view = detail
    if ns.json:
        _print_json({**view, "timeline": timeline})
        return 0
    width = max(len(name) for name in view)
    for name, value in view.items():
        if isinstance(value, (list, dict)):
            value = json.dumps(value, ensure_ascii=False)
        print(f"{name:<{width}}  {'-' if value is None else value}")
    for entry in timeline:  # one line per state change, under the one name
        print(f"{'timeline':<{width}}  {entry['at']}  {timeline_line(entry)}")
    return 0


def cmd_reschedule(ns: argparse.Namespace) -> int:
    with open_client(ns) as client:
        moved = client.reschedule(ns.job_id, eta=ns.eta, countdown=ns.countdown)
        record = read(client, lambda: client.storage.get_job(ns.job_id))
    if record is None:
        return _no_such_job(ns.job_id)
    view = job_view(record)
    if ns.json:
        _print_json(reschedule_view(ns.job_id, moved, record))
    elif moved:
        print(f"{ns.job_id} rescheduled, due {view['due_at']}")
    else:
        print(
            f"parallel-scheduler: {ns.job_id} not rescheduled: it is {view['state']}, "
            "not scheduled or failed",
            file=sys.stderr,
        )
    return 0 if moved else 1


def cmd_list(ns: argparse.Namespace) -> int:
    state = None if ns.state is None else JobState(ns.state)
    with open_client(ns, read_only=True) as client:
        records = read(client, lambda: list_jobs(client.storage, state, ns.limit, ns.offset))
    columns = {
        "id": "id",
        "task": "task",
        "state": "state",
        "due": "due_at",
        "attempts": "attempts",
        "last error": "last_error",
        "problem": "problem",
    }
    print_listing([job_view(record) for record in records], columns, as_json=ns.json)
    return 0


def cmd_cancel(ns: argparse.Namespace) -> int:
    with open_client(ns) as client:
        outcomes = [cancel_view(job_id, client.cancel(job_id)) for job_id in ns.job_ids]
    if ns.json:
        _print_json(outcomes)
    else:
        for outcome in outcomes:
            if outcome["cancelled"]:
                print(f"{one_line(outcome['id'])} cancelled")
            else:
                print(f"{one_line(outcome['id'])} not cancelled: no such scheduled job")
    return 0 if all(outcome["cancelled"] for outcome in outcomes) else 1
