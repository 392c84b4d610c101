"""The status report: which store, how many jobs per state, the next due job, the lock holders
and the scheduler instances (alive or dead, see ``scheduler_views.py``). ``parallel-scheduler
status`` prints it and the dashboard's overview shows it: one report, two views.

Read-only, and it never fails on what the store holds: a next due time that cannot be shown as a
date (a row written out of range) is reported as its raw value with a problem, not a traceback.
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
from parallel_scheduler.process.scheduler_views import scheduler_views
from parallel_scheduler.ranges import instant
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import InstanceRecord, LockLease, StorageError, shards_of

__all__ = ["lock_leases", "status_report"]

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


def status_report(client: Client) -> dict[str, Any]:
    storage = client.storage
    leases = lock_leases(client)
    holder, recurring_holder = list(leases.values())[:2]  # shard 0's: the whole store's
    next_due = _read(client, storage.next_due_at)
    now = _read(client, storage.now)
    problems: list[str] = []
    instances: list[InstanceRecord] = []
    unreadable: list[str] = []  # not in ``problems``: that one is about the next due time
    try:
        instances = _read(client, storage.list_instances)
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
        "recurring_jobs": _read(client, storage.count_recurring),
        "recurring_lock_holder": None if recurring_holder is None else recurring_holder.owner,
        "schedulers": scheduler_views(instances, now, interval, holders),
        "settings": client.settings.describe(),
        "problem": "; ".join(problems + unreadable) or None,
    }
