"""Is the scheduling healthy? The one place that says so, from what storage says
(``status_report.health_facts``): ``parallel-scheduler status --check``, the dashboard's banner
and the exporter's ``parallel_scheduler_health_problems`` all judge with ``health_problems``.

A problem is one of ``PROBLEM_KINDS``:

* ``no_live_scheduler``: jobs (or recurring runs) are due and no scheduler instance is alive
  (its heartbeat is at most ``DEAD_AFTER_INTERVALS`` of its intervals old);
* ``lag``: the earliest due job has waited longer than ``max_lag`` seconds;
* ``dead_lock_holder``: a lock is held by an instance whose heartbeat stopped longer ago than it
  takes to be shown dead plus one lock lease: a dead holder's lease would have run out by then,
  so something still renews it (a process whose heartbeat is stuck while its lock thread lives);
* ``recurring_overdue``: a recurring job's next run is further in the past than the grace
  (``max_lag`` unless given): no recurring scheduler fires it;
* ``unreadable``: the scheduler instances cannot be read, so health cannot be told (``status
  --check`` exits 2 on it, as on any storage error).

Every message is one line, meant for a person reading a probe's output or a banner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from parallel_scheduler.client import Client
from parallel_scheduler.process.liveness import DEAD_AFTER_INTERVALS
from parallel_scheduler.process.scheduler_views import number
from parallel_scheduler.process.status_report import health_facts
from parallel_scheduler.settings import Settings

__all__ = [
    "HEALTH_CACHE",
    "PROBLEM_KINDS",
    "HealthCache",
    "Problem",
    "health_problems",
    "read_health",
]

PROBLEM_KINDS: Final = (
    "no_live_scheduler",
    "lag",
    "dead_lock_holder",
    "recurring_overdue",
    "unreadable",
)
#: Seconds a ``HealthCache`` reuses its last judgement (the dashboard's banner, the exporter).
HEALTH_CACHE: Final = 5.0


@dataclass(frozen=True)
class Problem:
    """One reason the scheduling is unhealthy: its ``kind`` (``PROBLEM_KINDS``) and one line."""

    kind: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}

    def __str__(self) -> str:
        return self.message


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _own(view: Mapping[str, Any], name: str, default: float) -> float:
    """A setting of the instance's own (instances may run with other settings)."""
    settings = view.get("settings")
    own = number(settings.get(name)) if isinstance(settings, dict) else None
    return own if own is not None and own > 0 else default


def _no_live_scheduler(facts: Mapping[str, Any]) -> Problem | None:
    views = facts["schedulers"]
    if any(view["alive"] for view in views):
        return None
    next_due = facts["next_due_in_seconds"]
    next_run = facts["next_recurring_in_seconds"]
    due = next_due is not None and next_due <= 0
    runs_due = next_run is not None and next_run <= 0
    if not (due or runs_due):
        return None
    what = "jobs are due" if due else "recurring runs are due"
    if due and runs_due:
        what = "jobs and recurring runs are due"
    dead = f" ({len(views)} dead instance(s) on record)" if views else ""
    return Problem(
        "no_live_scheduler",
        f"no live scheduler while {what} (lag {_seconds(facts['lag_seconds'])}){dead}",
    )


def _dead_lock_holders(facts: Mapping[str, Any], settings: Settings) -> list[Problem]:
    by_id = {view["id"]: view for view in facts["schedulers"]}
    problems = []
    for label, holder in facts["locks"].items():
        view = None if holder is None else by_id.get(holder["owner"])
        if view is None or view["alive"] or view["heartbeat_age_seconds"] is None:
            continue
        interval = _own(view, "heartbeat_interval", settings.heartbeat_interval)
        lease = _own(view, "lock_lease", settings.lock_lease)
        age = view["heartbeat_age_seconds"]
        if age <= DEAD_AFTER_INTERVALS * interval + lease:
            continue  # the usual take-over: its lease runs out within one lease of its death
        problems.append(
            Problem(
                "dead_lock_holder",
                f"lock {label} is held by dead instance {view['id']} (last heartbeat "
                f"{_seconds(age)} ago, past its {_seconds(lease)} lease)",
            )
        )
    return problems


def _recurring_overdue(facts: Mapping[str, Any], grace: float) -> Problem | None:
    next_run = facts["next_recurring_in_seconds"]
    if next_run is None or -next_run <= grace:
        return None
    late = [
        f"{run['id']} by {_seconds(-run['next_run_in_seconds'])}"
        for run in facts["overdue_recurring"]
        if run["next_run_in_seconds"] is not None and -run["next_run_in_seconds"] > grace
    ]
    named = f": {', '.join(late)}" if late else ""
    return Problem(
        "recurring_overdue",
        f"recurring job(s) overdue by more than {_seconds(grace)}{named}",
    )


def health_problems(
    facts: Mapping[str, Any],
    *,
    max_lag: float,
    settings: Settings | None = None,
    recurring_grace: float | None = None,
) -> list[Problem]:
    """The problems ``facts`` show (``health_facts``' dict, or ``status_report``'s, which holds
    it); none: healthy. ``max_lag``: the lag allowed, in seconds. ``settings``: the intervals
    and lease of an instance whose record does not say its own. ``recurring_grace``: how far a
    recurring job's next run may lie in the past (default: ``max_lag``)."""
    settings = settings or Settings()
    grace = max_lag if recurring_grace is None else recurring_grace
    if facts.get("schedulers_unreadable"):
        return [Problem("unreadable", str(facts["schedulers_unreadable"]))]
    problems = []
    if (found := _no_live_scheduler(facts)) is not None:
        problems.append(found)
    if facts["lag_seconds"] > max_lag:
        problems.append(
            Problem(
                "lag",
                f"lag {_seconds(facts['lag_seconds'])} is above {_seconds(max_lag)}: the "
                f"earliest due job is waiting",
            )
        )
    problems += _dead_lock_holders(facts, settings)
    if (found := _recurring_overdue(facts, grace)) is not None:
        problems.append(found)
    return problems


def read_health(client: Client, *, max_lag: float | None = None) -> list[Problem]:
    """The problems of the store ``client`` opens, read now. ``max_lag``: default the
    ``lag_alert`` setting. Raises what storage raises (it cannot be reached: no judgement)."""
    settings = client.settings
    lag = settings.lag_alert if max_lag is None else max_lag
    return health_problems(health_facts(client), max_lag=lag, settings=settings)


class HealthCache:
    """``read_health`` at most once per ``cache_seconds``, for whoever asks on every page or
    scrape. ``problems()`` returns the problems, or raises what the last read raised."""

    def __init__(
        self,
        client: Client,
        *,
        max_lag: float | None = None,
        cache_seconds: float = HEALTH_CACHE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._max_lag = max_lag
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._guard = threading.Lock()  # one read at a time, whoever asks
        self._read_at = -float("inf")
        self._last: list[Problem] | Exception = []

    def problems(self) -> list[Problem]:
        with self._guard:
            if self._clock() - self._read_at >= self._cache_seconds:
                try:
                    self._last = read_health(self._client, max_lag=self._max_lag)
                except Exception as exc:  # kept, so a dead store is not asked on every request
                    self._last = exc
                self._read_at = self._clock()
            last = self._last
        if isinstance(last, Exception):
            raise last
        return list(last)
