"""``app.conf.beat_schedule`` becomes durable recurring jobs (``sync_beat_schedule``).

Every scheduler start (this beat scheduler class, the worker bootstep, ``celery -A proj
parallel-scheduler``, ``parallel-scheduler run --app``) syncs the entries into the store, and
the recurring scheduler fires them: any number of these may run, each tick fires exactly once.

The sync rule: entry ``name`` is the recurring job ``beat-<name>`` (characters other than
letters, digits and ``_.:-`` become ``_``). A new or changed entry is saved (its next run
recomputed); an unchanged one is left alone, so a restart never skips or repeats a tick. A
``beat-…`` recurring job whose entry is gone from ``beat_schedule`` is **removed**. Recurring jobs
made through the API (ids not starting with ``beat-``) are never touched. ``crontab`` entries
keep their fields and run in the app's time zone; ``timedelta``/number intervals become interval
schedules; ``solar`` schedules are refused with an error naming the entry.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery.schedules import crontab
from celery.schedules import schedule as interval_schedule

from parallel_scheduler.errors import ConfigurationError, InvalidJobError
from parallel_scheduler.jitter import check_jitter
from parallel_scheduler.job_checks import ROUTING_OPTIONS
from parallel_scheduler.recurring.failure_policy import check_pause_after_failures
from parallel_scheduler.recurring.jobs import RecurringJob, RecurringJobs
from parallel_scheduler.recurring.overlap_policy import DEFAULT_OVERLAP_TIMEOUT, check_overlap

__all__ = ["BEAT_PREFIX", "SyncReport", "recurring_id_for", "schedule_of", "sync_beat_schedule"]

logger = logging.getLogger(__name__)
BEAT_PREFIX = "beat-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


def recurring_id_for(name: str) -> str:
    return BEAT_PREFIX + _UNSAFE.sub("_", name)


def _cron_field(value: Any) -> str:
    if isinstance(value, (set, frozenset, list, tuple, range)):
        return ",".join(str(v) for v in sorted(value))
    return str(value)


def _zone_name(app: Any) -> str:
    zone = app.timezone
    return str(getattr(zone, "key", None) or zone.tzname(None) or "UTC")


def schedule_of(name: str, entry_schedule: Any, app: Any) -> dict[str, Any]:
    """The recurring schedule (``cron`` or ``every``, and ``timezone``) of one beat entry."""
    if isinstance(entry_schedule, crontab):
        fields = (
            entry_schedule._orig_minute,
            entry_schedule._orig_hour,
            entry_schedule._orig_day_of_month,
            entry_schedule._orig_month_of_year,
            entry_schedule._orig_day_of_week,
        )
        return {"cron": " ".join(_cron_field(f) for f in fields), "timezone": _zone_name(app)}
    if isinstance(entry_schedule, interval_schedule) and type(entry_schedule) is interval_schedule:
        return {"every": entry_schedule.run_every.total_seconds()}
    if isinstance(entry_schedule, timedelta):
        return {"every": entry_schedule.total_seconds()}
    if isinstance(entry_schedule, (int, float)) and not isinstance(entry_schedule, bool):
        return {"every": float(entry_schedule)}
    raise ConfigurationError(
        f"beat entry {name!r}: {type(entry_schedule).__name__} schedules are not supported; "
        "use crontab or a timedelta"
    )


@dataclass
class SyncReport:
    saved: list[str]
    unchanged: list[str]
    removed: list[str]


def _when(existing: RecurringJob) -> dict[str, Any]:
    if existing.schedule.every is not None:
        return {"every": existing.schedule.every}
    return {"cron": existing.schedule.cron, "timezone": existing.schedule.timezone}


def _same(
    name: str, existing: RecurringJob, entry: Mapping[str, Any], when: Mapping[str, Any]
) -> bool:
    """True when saving ``entry`` would change nothing (so its next run is left alone)."""
    return (
        existing.task == entry["task"]
        and existing.args == list(entry.get("args") or ())
        and existing.kwargs == dict(entry.get("kwargs") or {})
        and existing.options == _options(entry)
        and existing.schedule.jitter == _jitter(name, entry)
        and (
            existing.schedule.overlap,
            existing.schedule.overlap_timeout,
            existing.schedule.pause_after_failures,
        )
        == tuple(_overlap(name, entry).values())
        and _when(existing) == dict(when)
    )


def _options(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (entry.get("options") or {}).items() if k in ROUTING_OPTIONS}


def _jitter(name: str, entry: Mapping[str, Any]) -> float:
    """``options={"jitter": SECONDS}`` of a beat entry, in seconds (a ``timedelta`` too, so an
    unchanged entry compares equal to what is stored); 0 without; a bad one names the entry."""
    try:
        return check_jitter((entry.get("options") or {}).get("jitter"))
    except InvalidJobError as exc:
        raise InvalidJobError(f"beat entry {name!r}: {exc}") from None


def _overlap(name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """``options={"overlap": ..., "overlap_timeout": SECONDS, "pause_after_failures": K}`` of
    a beat entry (``allow``, 3600 and ``None`` without), checked; a bad one names the entry."""
    options = entry.get("options") or {}
    overlap = options.get("overlap", "allow")
    timeout = options.get("overlap_timeout", DEFAULT_OVERLAP_TIMEOUT)
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    try:
        return {
            "overlap": overlap,
            "overlap_timeout": check_overlap(overlap, timeout),
            "pause_after_failures": check_pause_after_failures(options.get("pause_after_failures")),
        }
    except InvalidJobError as exc:
        raise InvalidJobError(f"beat entry {name!r}: {exc}") from None


def _beat_jobs(recurring: RecurringJobs) -> Iterable[RecurringJob]:
    offset = 0
    while page := recurring.list(limit=500, offset=offset):
        yield from (job for job in page if job.id.startswith(BEAT_PREFIX))
        offset += len(page)


def sync_beat_schedule(app: Any, recurring: RecurringJobs) -> SyncReport:
    """Make the ``beat-…`` recurring jobs match ``app.conf.beat_schedule`` (the module's rule):
    the stored ones read in pages, the new and changed ones saved in one ``save_many``."""
    entries: Mapping[str, Mapping[str, Any]] = app.conf.beat_schedule or {}
    report = SyncReport([], [], [])
    stored = {job.id: job for job in _beat_jobs(recurring)}
    wanted: dict[str, str] = {}
    changed: list[dict[str, Any]] = []
    for name, entry in entries.items():
        rid = recurring_id_for(name)
        if rid in wanted:
            raise ConfigurationError(
                f"beat entries {wanted[rid]!r} and {name!r} both map to recurring job {rid!r}"
            )
        wanted[rid] = name
        when = schedule_of(name, entry["schedule"], app)
        existing = stored.get(rid)
        if existing is not None and _same(name, existing, entry, when):
            report.unchanged.append(rid)
            continue
        changed.append(
            {
                "id": rid,
                "task": entry["task"],
                "args": list(entry.get("args") or ()),
                "kwargs": dict(entry.get("kwargs") or {}),
                **when,
                "jitter": _jitter(name, entry),
                **_overlap(name, entry),
                **_options(entry),
            }
        )
        report.saved.append(rid)
    if changed:
        recurring.save_many(changed, mode="upsert")
    for rid in stored:
        if rid not in wanted and recurring.remove(rid):
            report.removed.append(rid)
    logger.info(
        "beat_schedule synced: %d saved, %d unchanged, %d removed",
        len(report.saved),
        len(report.unchanged),
        len(report.removed),
    )
    return report
