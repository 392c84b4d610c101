"""``status``'s scheduler instances as a table (the views are ``process/scheduler_views.py``'s)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from parallel_scheduler.cli.render import print_table
from parallel_scheduler.process.scheduler_views import KINDS, last_pass_at, number
from parallel_scheduler.process.shard_assignment import describe_shards

__all__ = ["print_schedulers"]


def _pass_summary(view: Mapping[str, Any], now: float) -> str:
    parts = []
    for kind in KINDS:
        last = view["last_pass"].get(kind)
        at = last_pass_at(view, kind)
        if not isinstance(last, dict) or at == -math.inf:
            continue
        done = "released" if kind == "delayed" else "fired"
        duration = number(last.get("duration_seconds"))
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
