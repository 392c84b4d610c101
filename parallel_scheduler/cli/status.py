"""``status``: which store, how many jobs per state, the next due job, the lock holders and the
scheduler instances (alive or dead, see ``schedulers.py``).

Read-only, and it never fails on what the store holds: a next due time that cannot be shown as a
date (a row written out of range) is reported as its raw value with a problem, not a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
from functools import partial
from typing import Any

import storage_adapters
from parallel_scheduler.cli.opening import describe_storage, open_client, read
from parallel_scheduler.cli.render import instant, print_table
from parallel_scheduler.cli.schedulers import print_schedulers, scheduler_views
from parallel_scheduler.client import Client
from parallel_scheduler.delayed_scheduler import DelayedJobScheduler
from parallel_scheduler.recurring_scheduler import RecurringJobScheduler
from storage_adapters import InstanceRecord, LockLease, StorageError, shards_of

__all__ = ["add_commands", "lock_leases", "status_report"]


def add_commands(commands: Any) -> None:
    status = commands.add_parser("status", help="counts per state, next due job, lock holders")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=cmd_status)


def _seconds_until(epoch: float | None, now: float) -> float | None:
    if epoch is None or not math.isfinite(epoch - now):
        return None
    return round(epoch - now, 3)


def _holder(lease: LockLease | None, now: float) -> dict[str, Any] | None:
    if lease is None:
        return None
    return {
        "owner": lease.owner,
        "token": lease.token,
        "expires_in_seconds": _seconds_until(lease.expires_at, now),
    }


def lock_leases(client: Client) -> dict[str, LockLease | None]:
    """Every scheduler lock's lease now, by the name people see: ``delayed-scheduler``, or with
    shards one per shard, ``delayed-scheduler#3`` (each read from its shard's store)."""
    stores = shards_of(client.storage)
    names = (DelayedJobScheduler.LOCK_NAME, RecurringJobScheduler.LOCK_NAME)
    leases: dict[str, LockLease | None] = {}
    for shard, store in enumerate(stores):
        for name in names:
            label = name if len(stores) == 1 else f"{name}#{shard}"
            leases[label] = read(client, partial(store.lock_holder, name))
    return leases


def status_report(client: Client) -> dict[str, Any]:
    storage = client.storage
    leases = lock_leases(client)
    holder, recurring_holder = list(leases.values())[:2]  # shard 0's: the whole store's
    next_due = read(client, storage.next_due_at)
    now = read(client, storage.now)
    problems: list[str] = []
    instances: list[InstanceRecord] = []
    unreadable: list[str] = []  # not in ``problems``: that one is about the next due time
    try:
        instances = read(client, storage.list_instances)
    except StorageError as exc:  # liveness is one section of status: the rest still shows
        unreadable.append(f"scheduler instances cannot be read: {exc}")
    holders = {label: None if lease is None else lease.owner for label, lease in leases.items()}
    interval = client.settings.heartbeat_interval
    return {
        "storage": describe_storage(client.settings.storage_url or storage_adapters.DEFAULT_URL),
        "counts": client.counts(),
        "next_due_at": instant("next due_at", next_due, problems),
        "next_due_in_seconds": _seconds_until(next_due, now) if not problems else None,
        "lock_holder": _holder(holder, now),
        "recurring_jobs": read(client, storage.count_recurring),
        "recurring_lock_holder": None if recurring_holder is None else recurring_holder.owner,
        "schedulers": scheduler_views(instances, now, interval, holders),
        "settings": client.settings.describe(),
        "problem": "; ".join(problems + unreadable) or None,
    }


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
