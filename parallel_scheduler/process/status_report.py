"""The status report: which store, how many jobs per state, the next due job, the lock holders,
the pauses in force and the scheduler instances (alive or dead, see ``scheduler_views.py``).
``parallel-scheduler status`` prints it and the dashboard's overview shows it: one report, two
views.

Read-only, and it never fails on what the store holds: a next due time that cannot be shown as a
date (a row written out of range) is reported as its raw value with a problem, not a traceback.

``health_facts`` is the part of the report that ``process/health.py`` judges (the storage clock,
the next due job and recurring run, every lock's holder, the scheduler instances): fewer reads
than the whole report, for the dashboard's banner on every page and the exporter's scrapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import storage_adapters
from parallel_scheduler.client import Client
from parallel_scheduler.delayed.scheduler import DelayedJobScheduler
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.opening_storage import describe_storage
from parallel_scheduler.pausing import pause_view
from parallel_scheduler.process.scheduler_views import scheduler_views
from parallel_scheduler.ranges import instant
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import InstanceRecord, LockLease, StorageError, shards_of

__all__ = ["OVERDUE_SHOWN", "health_facts", "lock_leases", "status_report"]

#: Recurring jobs named at most when their runs are overdue (the earliest ones).
OVERDUE_SHOWN = 5

T = TypeVar("T")


def _read(client: Client, fn: Callable[[], T]) -> T:
    """A storage read, retried as briefly as every interactive call."""
    return call_storage(fn, give_up_after=client.retry_for)


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
            leases[label] = _read(client, partial(store.lock_holder, name))
    return leases


def _overdue_recurring(client: Client, next_run: float | None, now: float) -> list[dict[str, Any]]:
    """The earliest recurring jobs whose next run is in the past (none read when none is)."""
    if next_run is None or not math.isfinite(next_run) or next_run > now:
        return []
    records = _read(client, partial(client.storage.fetch_due_recurring, OVERDUE_SHOWN))
    return [
        {"id": r.id, "next_run_in_seconds": _seconds_until(r.next_run_at, now)} for r in records
    ]


def health_facts(client: Client) -> dict[str, Any]:
    """What ``process/health.py`` judges, read from storage now: the storage clock (``now``),
    the next due job and how late it is (``lag_seconds``, 0 when nothing is due yet), the next
    recurring run and the recurring jobs overdue, every lock's holder (``locks``, by the name
    ``lock_leases`` gives), the scheduler instances, and the problems of reading them."""
    storage = client.storage
    leases = lock_leases(client)
    next_due = _read(client, storage.next_due_at)
    next_run = _read(client, storage.next_recurring_at)
    now = _read(client, storage.now)
    problems: list[str] = []
    instances: list[InstanceRecord] = []
    unreadable: list[str] = []  # not in ``problems``: that one is about the next due time
    try:
        instances = _read(client, storage.list_instances)
    except StorageError as exc:  # liveness is one section of status: the rest still shows
        unreadable.append(f"scheduler instances cannot be read: {exc}")
    holders = {label: None if lease is None else lease.owner for label, lease in leases.items()}
    next_due_at = instant("next due_at", next_due, problems)
    next_due_in = _seconds_until(next_due, now) if not problems else None
    next_run_problems: list[str] = []
    next_run_at = instant("next recurring run", next_run, next_run_problems)
    return {
        "now": now,
        "next_due_at": next_due_at,
        "next_due_in_seconds": next_due_in,
        "lag_seconds": 0.0 if next_due_in is None else max(0.0, -next_due_in),
        "next_recurring_at": next_run_at,
        "next_recurring_in_seconds": (
            _seconds_until(next_run, now) if not next_run_problems else None
        ),
        "overdue_recurring": _overdue_recurring(client, next_run, now),
        "locks": {label: _holder(lease, now) for label, lease in leases.items()},
        "schedulers": scheduler_views(instances, now, client.settings.heartbeat_interval, holders),
        "schedulers_unreadable": unreadable[0] if unreadable else None,
        "problem": "; ".join(problems + next_run_problems + unreadable) or None,
    }


def status_report(client: Client) -> dict[str, Any]:
    """The whole report: ``health_facts`` with the store, the counts per state, the recurring
    jobs' count, the two locks of the whole store by their old keys, the pauses in force
    (``pausing.pause_view`` each) and the settings."""
    facts = health_facts(client)
    locks = list(facts["locks"].values())
    holder, recurring_holder = locks[:2]  # shard 0's: the whole store's
    return {
        "storage": describe_storage(client.settings.storage_url or storage_adapters.DEFAULT_URL),
        "counts": client.counts(),
        **facts,
        "lock_holder": holder,
        "recurring_jobs": _read(client, client.storage.count_recurring),
        "recurring_lock_holder": None if recurring_holder is None else recurring_holder["owner"],
        "pauses": [pause_view(pause) for pause in client.pauses()],
        "settings": client.settings.describe(),
    }
