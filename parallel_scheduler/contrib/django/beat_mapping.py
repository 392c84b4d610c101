"""One django-celery-beat ``PeriodicTask`` as what we store: a recurring job (crontab, interval),
one delayed job (clocked, or ``one_off``), or a refusal with the reason. Only exact equivalents
are made; anything whose ticks would differ from django-celery-beat's is refused, never
approximated. Pure: it reads the model's fields and asks no storage.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from parallel_scheduler.celery.beat_sync import BEAT_PREFIX
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.recurring.accepting import MAX_RECURRING_ID_LENGTH, validate_recurring_id
from parallel_scheduler.recurring.triggers import Schedule, next_tick

__all__ = ["Mapped", "Refused", "Skipped", "imported_id", "map_task"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
#: The fields of a crontab, Celery's attribute names, with the range each covers.
_CRON_FIELDS = (
    ("minute", range(60)),
    ("hour", range(24)),
    ("day_of_month", range(1, 32)),
    ("month_of_year", range(1, 13)),
    ("day_of_week", range(7)),  # Celery's numbering: 0 is Sunday, as cron's
)
#: Years ahead searched for DST gaps a crontab's wall times fall into.
GAP_HORIZON_YEARS = 10
#: The header django-celery-beat adds to every message it sends.
NAME_HEADER = "periodic_task_name"


class Refused(Exception):
    """A task that cannot be imported exactly; the message says why."""


class Skipped(Refused):
    """A task with nothing left to import (a one-off that ran); not an error."""


@dataclass
class Mapped:
    """One PeriodicTask as we would store it: ``kind`` is ``"recurring"`` (``item`` holds
    ``save_many``'s arguments) or ``"delayed"`` (``item`` holds ``Client.schedule``'s)."""

    name: str
    id: str
    kind: str
    task: str
    schedule: str
    zone: str
    item: dict[str, Any] = field(default_factory=dict)

    @property
    def queue(self) -> str:
        return str(self.item.get("queue") or "")


def imported_id(name: str) -> str:
    """The id of the imported job: the name itself when it is a valid recurring id outside the
    beat sync's ``beat-`` namespace, else the name made safe plus a hash of it (distinct names
    never share an id)."""
    if not name.startswith(BEAT_PREFIX):
        try:
            return validate_recurring_id(name)
        except InvalidJobError:
            pass
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    safe = _UNSAFE.sub("_", name.replace("@", "_"))
    return f"{safe[: MAX_RECURRING_ID_LENGTH - len(digest) - 1]}-{digest}"


def _json(text: str | None, default: str, what: str, kind: type) -> Any:
    try:
        value = json.loads(text or default)
    except ValueError as exc:
        raise Refused(f"{what} is not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise Refused(f"{what} must be a JSON {'list' if kind is list else 'object'}")
    return value


def _options(task: Any) -> dict[str, Any]:
    """Send options as django-celery-beat passes them (``ModelEntry``), headers included."""
    options = {
        name: getattr(task, name)
        for name in ("queue", "exchange", "routing_key", "priority")
        if getattr(task, name) not in (None, "")
    }
    headers = _json(task.headers, "{}", "headers", dict)
    options["headers"] = {**headers, NAME_HEADER: task.name}
    if task.expire_seconds is not None:
        raise Refused(
            f"expire_seconds={task.expire_seconds}: each message expiring that long after it is "
            "sent has no equivalent here (firings carry an absolute expires); use expires"
        )
    if task.expires is not None:
        options["expires"] = task.expires
    return options


def _cron_text(values: set[int], full: range) -> str:
    """Celery's expanded set as a cron field: ``*`` for all, runs of three or more as ranges."""
    if values >= set(full):
        return "*"
    ordered = sorted(values)
    parts: list[str] = []
    start = previous = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        if start == previous:
            parts.append(str(start))
        else:
            parts.append(f"{start}{'-' if previous - start > 1 else ','}{previous}")
        if value is not None:
            start = previous = value
    return ",".join(parts)


def crontab_cron(crontab: Any) -> str:
    """A django-celery-beat ``CrontabSchedule`` as a 5-field cron expression, from Celery's own
    parse of its fields; refused when day of month and day of week are both restricted (Celery
    requires both to match, cron either)."""
    parsed = crontab.schedule
    texts = [_cron_text(getattr(parsed, name), full) for name, full in _CRON_FIELDS]
    if texts[2] != "*" and texts[4] != "*":
        raise Refused(
            f"day_of_month {crontab.day_of_month!r} and day_of_week {crontab.day_of_week!r} are "
            "both restricted: Celery fires when both match, cron when either does"
        )
    return " ".join(texts)


def _zone_key(crontab: Any, zone_of_app: str) -> str:
    from django.conf import settings

    if not getattr(settings, "DJANGO_CELERY_BEAT_TZ_AWARE", True):
        return zone_of_app
    return str(getattr(crontab.timezone, "key", crontab.timezone))


@lru_cache(maxsize=256)
def _spring_gaps(zone_key: str, year: int) -> tuple[tuple[datetime, int], ...]:
    """The wall-clock gaps of a zone's spring-forwards from ``year`` on: (first missing wall
    time, minutes missing), found day by day and each instant by bisection."""
    zone = ZoneInfo(zone_key)
    gaps = []
    begin = int(datetime(year, 1, 1, tzinfo=timezone.utc).timestamp())
    end = int(datetime(year + GAP_HORIZON_YEARS, 1, 1, tzinfo=timezone.utc).timestamp())

    def offset(moment: int) -> timedelta:
        return datetime.fromtimestamp(moment, zone).utcoffset() or timedelta()

    for low in range(begin, end, 86_400):
        high = low + 86_400
        before, after = offset(low), offset(high)
        if after <= before:
            continue
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if offset(middle) == after else (middle, high)
        wall = datetime.fromtimestamp(high, timezone.utc).replace(tzinfo=None) + before
        gaps.append((wall, int((after - before).total_seconds()) // 60))
    return tuple(gaps)


def _check_gaps(parsed: Any, zone_key: str, year: int) -> None:
    """Refuse a crontab that names a wall time inside a spring-forward gap (but its first
    minute): Celery runs it as late as the gap is long, we at the end of the gap."""
    for first, minutes in _spring_gaps(zone_key, year):
        for step in range(1, minutes):
            wall = first + timedelta(minutes=step)
            if (
                wall.minute in parsed.minute
                and wall.hour in parsed.hour
                and wall.day in parsed.day_of_month
                and wall.month in parsed.month_of_year
                and wall.isoweekday() % 7 in parsed.day_of_week
            ):
                raise Refused(
                    f"it names {wall:%Y-%m-%d %H:%M}, inside the spring-forward gap of {zone_key}: "
                    "django-celery-beat runs it a gap's length later, we at the gap's end; "
                    "move it out of the gap"
                )


def _instant(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _when(task: Any, now: datetime, zone_of_app: str) -> tuple[dict[str, Any], str, str]:
    """The schedule arguments of a crontab or interval task, and the schedule and zone shown."""
    if task.crontab_id is not None:
        zone = _zone_key(task.crontab, zone_of_app)
        cron = crontab_cron(task.crontab)
        _check_gaps(task.crontab.schedule, zone, now.year)
        return {"cron": cron, "timezone": zone, "start": task.start_time}, cron, zone
    if task.interval_id is not None:
        every = timedelta(**{task.interval.period: task.interval.every}).total_seconds()
        # django-celery-beat runs an interval from the last run (or the start, or the row's last
        # change): that instant is the phase of our fixed grid.
        anchor = task.last_run_at or task.start_time or task.date_changed
        if task.start_time is not None and anchor < task.start_time:
            anchor = task.start_time
        return (
            {"every": every, "start": anchor},
            f"every {every:g} s from {anchor.isoformat()}",
            "UTC",
        )
    raise Refused("no schedule set (none of crontab, interval, clocked, solar)")


def map_task(task: Any, now: datetime, zone_of_app: str = "UTC") -> Mapped:
    """The PeriodicTask ``task`` as we would store it at ``now``, or ``Refused`` saying why."""
    args = _json(task.args, "[]", "args", list)
    kwargs = _json(task.kwargs, "{}", "kwargs", dict)
    options = _options(task)
    if task.solar_id is not None:
        raise Refused(f"solar schedule ({task.solar}): sunrise/sunset times have no equivalent")
    if task.one_off and task.total_run_count > 0:
        raise Skipped("one_off and it ran already: django-celery-beat runs it no more")
    if task.one_off and not task.enabled:
        raise Refused("a disabled one_off task: a delayed job cannot be imported paused")
    if task.clocked_id is not None:
        if not task.enabled:
            raise Refused("a disabled clocked task: a delayed job cannot be imported paused")
        clocked = task.clocked.clocked_time
        call = {"args": args, "kwargs": kwargs, "eta": clocked, **options}
        return Mapped(task.name, imported_id(task.name), "delayed", task.task,
                      f"at {clocked.isoformat()}", "UTC", call)  # fmt: skip
    when, shown, zone_shown = _when(task, now, zone_of_app)
    if task.expires is not None:
        # django-celery-beat stops when now >= expires: a tick at expires itself does not run.
        when["end"] = task.expires - timedelta(microseconds=1)
    try:
        schedule = Schedule(
            when.get("cron", ""),
            timezone=when.get("timezone", "UTC"),
            start_at=_instant(when.get("start")),
            end_at=_instant(when.get("end")),
            every=when.get("every"),
        )
    except InvalidJobError as exc:
        raise Refused(str(exc)) from None
    if task.one_off:
        tick = next_tick(schedule, now.timestamp())
        if tick is None:
            raise Refused("one_off: its schedule never fires again")
        at = datetime.fromtimestamp(tick, timezone.utc)
        call = {"args": args, "kwargs": kwargs, "eta": at, **options}
        return Mapped(task.name, imported_id(task.name), "delayed", task.task,
                      f"once at {at.isoformat()} ({shown})", zone_shown, call)  # fmt: skip
    item = {"id": imported_id(task.name), "task": task.task, "args": args, "kwargs": kwargs}
    item.update({k: v for k, v in when.items() if v is not None}, enabled=task.enabled, **options)
    return Mapped(task.name, item["id"], "recurring", task.task, shown, zone_shown, item)
