"""``status``'s scheduler instances: every process's liveness record, alive or dead, what it
did last, the locks it holds, the shards it serves (``[0]`` without shards; ``None`` for a
record from a version that did not say) and which scheduler kind it is the active one for.

Like the rest of ``status`` it never fails on what storage holds: a record whose details are not
JSON, or whose heartbeat or pid is not a number, is shown with a ``problem`` (and as dead when its
age cannot be told), not as a traceback.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from storage_adapters import InstanceRecord

from ..instances import DEAD_AFTER_INTERVALS
from ..shard_assignment import describe_shards
from .render import instant, print_table

__all__ = ["print_schedulers", "scheduler_views"]

#: The scheduler kinds an instance runs, as named in its record's ``last_pass``.
KINDS = ("delayed", "recurring")


def _details(raw: str, problems: list[str]) -> dict[str, Any]:
    try:
        details = json.loads(raw)
    except ValueError as exc:
        problems.append(f"details are not JSON ({exc})")
        return {}
    if not isinstance(details, dict):
        problems.append(f"details are not a JSON object: {raw[:80]!r}")
        return {}
    return details


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _interval(settings: object, default: float) -> float:
    """The record's own heartbeat interval: instances may run with different settings."""
    own = _number(settings.get("heartbeat_interval")) if isinstance(settings, dict) else None
    return own if own is not None and own > 0 else default


def _view(record: InstanceRecord, now: float, default_interval: float) -> dict[str, Any]:
    problems: list[str] = []
    details = _details(record.details, problems)
    settings = details.get("settings")
    interval = _interval(settings, default_interval)
    heartbeat = _number(record.heartbeat_at)
    age = None if heartbeat is None else round(max(0.0, now - heartbeat), 3)
    if record.pid < 0:
        problems.append("pid is not a number")
    locks = details.get("locks", [])
    if not isinstance(locks, list) or not all(isinstance(lock, str) for lock in locks):
        problems.append(f"locks {locks!r} are not a list of names")
        locks = []
    shards = details.get("shards")
    if shards is not None and (
        not isinstance(shards, list)
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in shards)
    ):
        problems.append(f"shards {shards!r} are not a list of shard numbers")
        shards = None
    passes = details.get("last_pass") or {}
    if not isinstance(passes, dict):
        problems.append("last_pass is not a JSON object")
        passes = {}
    return {
        "id": record.id,
        "host": record.host,
        "pid": record.pid,
        "version": record.version,
        "started_at": instant("started_at", record.started_at, problems),
        "heartbeat_at": instant("heartbeat_at", record.heartbeat_at, problems),
        "heartbeat_age_seconds": age,
        "alive": age is not None and age <= DEAD_AFTER_INTERVALS * interval,
        "locks": locks,
        "shards": shards,
        "active_for": [],
        "last_pass": {kind: passes.get(kind) for kind in KINDS},
        "settings": settings if isinstance(settings, dict) else None,
        "problem": "; ".join(problems) or None,
    }


def _last_pass_at(view: Mapping[str, Any], kind: str) -> float:
    last = view["last_pass"].get(kind)
    at = _number(last.get("at")) if isinstance(last, dict) else None
    return -math.inf if at is None else at


def scheduler_views(
    records: list[InstanceRecord],
    now: float,
    default_interval: float,
    holders: Mapping[str, str | None],
) -> list[dict[str, Any]]:
    """One view per record. ``holders`` maps a kind to the owner of its lock now (storage's
    word, ``None`` when free): that instance is the active one; when the lock is free between
    passes, the live instance whose pass of that kind ended last is."""
    views = [_view(record, now, default_interval) for record in records]
    alive = [view for view in views if view["alive"]]
    for kind in KINDS:
        holder = holders.get(kind)
        active = next((view for view in alive if view["id"] == holder), None)
        if active is None and alive:
            latest = max(alive, key=lambda view: _last_pass_at(view, kind))
            active = latest if _last_pass_at(latest, kind) > -math.inf else None
        if active is not None:
            active["active_for"].append(kind)
    return views


def _pass_summary(view: Mapping[str, Any], now: float) -> str:
    parts = []
    for kind in KINDS:
        last = view["last_pass"].get(kind)
        at = _last_pass_at(view, kind)
        if not isinstance(last, dict) or at == -math.inf:
            continue
        done = "released" if kind == "delayed" else "fired"
        duration = _number(last.get("duration_seconds"))
        took = "?" if duration is None else f"{duration:.3f}s"
        parts.append(f"{kind} {max(0.0, now - at):.0f}s ago, {took}, {done} {last.get(done)}")
    return "; ".join(parts) or "-"


def print_schedulers(views: list[dict[str, Any]]) -> None:
    """The views as a table; a pass's age is on this host's clock (passes are stamped with their
    scheduler host's clock, heartbeats with storage's)."""
    now = time.time()
    alive = sum(1 for view in views if view["alive"])
    print(f"schedulers: {alive} alive, {len(views) - alive} dead")
    if not views:
        return
    rows = [
        (
            view["id"],
            view["host"],
            view["pid"],
            view["version"],
            "alive" if view["alive"] else "dead",
            "-" if view["heartbeat_age_seconds"] is None else f"{view['heartbeat_age_seconds']}s",
            ", ".join(view["locks"]) or "-",
            describe_shards(view["shards"] or ()),
            ", ".join(view["active_for"]) or "-",
            _pass_summary(view, now),
            view["problem"] or "-",
        )
        for view in views
    ]
    headers = ("id", "host", "pid", "version", "state", "heartbeat age", "locks", "shards")
    print_table((*headers, "active", "last pass", "problem"), rows)
