"""The scheduler instances as ``status`` and the dashboard show them: every process's liveness
record, alive or dead, what it did last, the locks it holds (storage's word), the shards it
serves (``[0]`` without shards; ``None`` for a record from a version that did not say) and which
locks it is the active one for:
the lock's holder, or while the lock is free, the instance whose last pass under it ended last.
An instance that only peeks (idle passes take no lock) is never the active one.

Like the rest of ``status`` it never fails on what storage holds: a record whose details are not
JSON, or whose heartbeat, pid or lock times are not numbers, is shown with a ``problem`` (and as
dead when its age cannot be told), not as a traceback. A record from before ``last_held`` counts
its last pass that held a lock instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from parallel_scheduler.process.liveness import DEAD_AFTER_INTERVALS
from parallel_scheduler.ranges import instant
from storage_adapters import InstanceRecord

__all__ = ["KINDS", "last_pass_at", "number", "scheduler_views"]

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


def number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _interval(settings: object, default: float) -> float:
    """The record's own heartbeat interval: instances may run with different settings."""
    own = number(settings.get("heartbeat_interval")) if isinstance(settings, dict) else None
    return own if own is not None and own > 0 else default


def _view(record: InstanceRecord, now: float, default_interval: float) -> dict[str, Any]:
    problems: list[str] = []
    details = _details(record.details, problems)
    settings = details.get("settings")
    interval = _interval(settings, default_interval)
    heartbeat = number(record.heartbeat_at)
    age = None if heartbeat is None else round(max(0.0, now - heartbeat), 3)
    if record.pid < 0:
        problems.append("pid is not a number")
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
    last_held = _last_held(details, passes, problems)
    return {
        "id": record.id,
        "host": record.host,
        "pid": record.pid,
        "version": record.version,
        "started_at": instant("started_at", record.started_at, problems),
        "heartbeat_at": instant("heartbeat_at", record.heartbeat_at, problems),
        "heartbeat_age_seconds": age,
        "alive": age is not None and age <= DEAD_AFTER_INTERVALS * interval,
        "locks": [],  # filled from storage's lock holders
        "shards": shards,
        "active_for": [],
        "last_pass": {kind: passes.get(kind) for kind in KINDS},
        "last_held": last_held,
        "settings": settings if isinstance(settings, dict) else None,
        "problem": "; ".join(problems) or None,
    }


def last_pass_at(view: Mapping[str, Any], kind: str) -> float:
    last = view["last_pass"].get(kind)
    at = number(last.get("at")) if isinstance(last, dict) else None
    return -math.inf if at is None else at


def _held_by_passes(passes: Mapping[str, Any]) -> dict[str, float]:
    """A record from before ``last_held``: its last pass of each kind, if it held the lock."""
    held = {}
    for kind in KINDS:
        last = passes.get(kind)
        if not isinstance(last, dict) or last.get("lock_acquired") is not True:
            continue
        at, shard = number(last.get("at")), last.get("shard")
        if at is None or last.get("idle") is True:
            continue
        numbered = isinstance(shard, int) and not isinstance(shard, bool)
        held[f"{kind}-scheduler#{shard}" if numbered else f"{kind}-scheduler"] = at
    return held


def _last_held(
    details: Mapping[str, Any], passes: Mapping[str, Any], problems: list[str]
) -> dict[str, float]:
    """When the instance's last pass under each lock ended, by lock name."""
    if "last_held" not in details:
        return _held_by_passes(passes)
    raw = details["last_held"]
    if not isinstance(raw, dict):
        problems.append(f"last_held {str(raw)[:80]!r} is not a JSON object")
        return {}
    times = {label: number(value) for label, value in raw.items()}
    held = {label: at for label, at in times.items() if at is not None}
    bad = [label for label in raw if label not in held]
    if bad:
        problems.append(f"last_held times of {', '.join(map(repr, bad[:3]))} are not numbers")
    return held


def _active_name(label: str) -> str:
    """``delayed-scheduler`` -> ``delayed``, ``delayed-scheduler#3`` -> ``delayed#3``."""
    name, sep, shard = label.partition("#")
    return f"{name.removesuffix('-scheduler')}{sep}{shard}"


def scheduler_views(
    records: list[InstanceRecord],
    now: float,
    default_interval: float,
    holders: Mapping[str, str | None],
) -> list[dict[str, Any]]:
    """One view per record. ``holders`` maps each lock (``delayed-scheduler``, or per shard
    ``delayed-scheduler#3``) to its owner now, storage's word (``None`` when free): the owner
    lists it under ``locks``, and is active for it (``delayed``, ``delayed#3``) when alive.
    While a lock is free, the instance whose last pass under it ended last is active for it,
    if alive; an instance that never held it (one that only peeks) never is."""
    views = [_view(record, now, default_interval) for record in records]
    by_id = {view["id"]: view for view in views}
    for label, holder in holders.items():
        active: dict[str, Any] | None
        if holder is not None:
            active = by_id.get(holder)
            if active is not None:
                active["locks"].append(label)
        else:
            active = max(views, key=lambda v: v["last_held"].get(label, -math.inf), default=None)
            if active is not None and label not in active["last_held"]:
                active = None
        if active is not None and active["alive"]:
            active["active_for"].append(_active_name(label))
    return views
