"""Cron schedules: next ticks across time zones and DST changes, and what to fire after a misfire.

Pure functions of (schedule, time): no I/O and no clock of their own, so every rule here is
tested with exact expected instants.

A schedule is a cron expression or a fixed interval (``every`` seconds, counted from the start
date or the Unix epoch, so it is the same on every host). Cron expressions have 5 fields
(minute resolution) or 6 with **seconds first** (as Quartz, Hangfire/Cronos and Spring write
them). They are evaluated on the wall clock of the schedule's
IANA time zone, with these DST rules (written down because Celery beat's are not, celery#6438):

* **fall-back** (a wall-clock hour happens twice): each wall-clock time fires **once**, at its
  **first** occurrence (the earlier, daylight-saving instant). The repeated pass fires nothing.
* **spring-forward** (a wall-clock hour is skipped): a time inside the gap fires **once, at the
  transition instant** (the first instant after the gap, e.g. 03:00 in Europe/Berlin); several
  times inside one gap fire once together. Nothing is skipped, nothing doubled.
* UTC and other zones without DST are unaffected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from .errors import InvalidJobError

__all__ = ["MISFIRE_POLICIES", "Schedule", "next_tick", "plan_firing"]

MisfirePolicy = Literal["skip", "run_once", "run_all"]
MISFIRE_POLICIES: tuple[MisfirePolicy, ...] = ("skip", "run_once", "run_all")
_MAX_STEPS = 100_000  # bound on cron iterations for one question; a real schedule needs few


@dataclass(frozen=True)
class Schedule:
    """When a recurring job fires.

    ``misfire_policy`` says what happens to ticks missed by more than ``misfire_grace`` seconds
    (no scheduler ran, or the job was due while the store was down): ``skip`` fires none of
    them; ``run_once`` (the default) fires one firing for all of them (the latest missed tick);
    ``run_all`` fires each, up to the ``misfire_cap`` most recent. Ticks within the grace are
    on time and always fire.
    """

    cron: str = ""
    timezone: str = "UTC"
    start_at: float | None = None
    end_at: float | None = None
    misfire_policy: MisfirePolicy = "run_once"
    misfire_cap: int = 100
    misfire_grace: float = 60.0
    every: float | None = None  # an interval in seconds instead of a cron expression

    def __post_init__(self) -> None:
        if self.every is not None:
            self._check_interval()
        else:
            self._check_cron()
        self.zone()
        self._check_bounds()

    def _check_interval(self) -> None:
        if self.cron:
            raise InvalidJobError("give a cron expression or an interval, not both")
        every = self.every
        if isinstance(every, bool) or not isinstance(every, (int, float)):
            raise InvalidJobError(f"interval must be a number of seconds, not {every!r}")
        if not math.isfinite(every) or every < 1:
            raise InvalidJobError(f"interval must be at least 1 second, not {every!r}")

    def _check_cron(self) -> None:
        if not isinstance(self.cron, str) or len(self.cron.split()) not in (5, 6):
            raise InvalidJobError(
                f"cron {self.cron!r} must have 5 fields (minute hour day month weekday) "
                "or 6 with seconds first"
            )
        try:
            croniter(self.cron, datetime(2000, 1, 1), second_at_beginning=True)
        except (CroniterBadCronError, ValueError, KeyError) as exc:
            raise InvalidJobError(f"invalid cron {self.cron!r}: {exc}") from None

    def _check_bounds(self) -> None:
        for name in ("start_at", "end_at"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
                raise InvalidJobError(f"{name} must be finite epoch seconds, not {value!r}")
        if self.start_at is not None and self.end_at is not None and self.end_at < self.start_at:
            raise InvalidJobError("end date is before the start date")
        if self.misfire_policy not in MISFIRE_POLICIES:
            raise InvalidJobError(
                f"misfire policy must be one of {MISFIRE_POLICIES}, not {self.misfire_policy!r}"
            )
        if isinstance(self.misfire_cap, bool) or not isinstance(self.misfire_cap, int):
            raise InvalidJobError(f"misfire cap must be an integer, not {self.misfire_cap!r}")
        if self.misfire_cap < 1:
            raise InvalidJobError(f"misfire cap must be at least 1, not {self.misfire_cap}")
        if not math.isfinite(self.misfire_grace) or self.misfire_grace < 0:
            raise InvalidJobError(f"misfire grace must be >= 0 seconds, not {self.misfire_grace}")

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            message = f"unknown time zone {self.timezone!r} (use an IANA name)"
            raise InvalidJobError(message) from None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        return cls(**json.loads(text))


def _instant(wall: datetime, zone: ZoneInfo) -> float:
    """The instant a cron wall-clock time fires, by the DST rules in the module docstring."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) == wall:
        return first.timestamp()  # exists; when it exists twice, fold=0 is the first one
    # In a spring-forward gap: fold=1 reads it with the later offset (an instant before the
    # jump), fold=0 with the earlier one (an instant after it). The jump lies between them.
    low, high = int(wall.replace(tzinfo=zone, fold=1).timestamp()), int(first.timestamp())
    after_offset = datetime.fromtimestamp(high, zone).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return float(high)


def _walls(schedule: Schedule, start: datetime, forward: bool) -> Iterator[datetime]:
    iterator = croniter(schedule.cron, start, second_at_beginning=True)
    step = iterator.get_next if forward else iterator.get_prev
    for _ in range(_MAX_STEPS):
        try:
            yield step(datetime)
        except CroniterBadDateError:  # no such date ever (e.g. 30 February)
            return


def _local_wall(epoch: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)


def _interval_tick(schedule: Schedule, moment: float, *, after: bool) -> float:
    """The interval tick strictly after ``moment``, or the last one at or before it. Ticks are
    ``start_at + k * every`` (the Unix epoch when there is no start), so every process agrees."""
    assert schedule.every is not None
    anchor = schedule.start_at or 0.0
    k = math.floor((moment - anchor) / schedule.every)
    tick = anchor + k * schedule.every
    if after:
        while tick <= moment:
            tick += schedule.every
    return tick


def next_tick(schedule: Schedule, after: float) -> float | None:
    """The first tick strictly after ``after`` within the start/end dates, or ``None``."""
    zone = schedule.zone()
    if schedule.start_at is not None and after < schedule.start_at:
        after = math.nextafter(schedule.start_at, -math.inf)
    if schedule.every is not None:
        tick = _interval_tick(schedule, after, after=True)
        return None if schedule.end_at is not None and tick > schedule.end_at else tick
    # Start a second early on the wall clock: a tick at the very instant `after` names must be
    # seen so that it can be compared (and rejected) rather than jumped over.
    for wall in _walls(schedule, _local_wall(math.floor(after) - 1, zone), forward=True):
        tick = _instant(wall, zone)
        if schedule.end_at is not None and tick > schedule.end_at:
            return None
        if tick > after:
            return tick
    return None


def _ticks_back(schedule: Schedule, due: float, now: float) -> Iterator[float]:
    """Ticks in ``[due, now]``, latest first, each once."""
    if schedule.every is not None:
        tick = _interval_tick(schedule, now, after=False)
        while tick >= due:
            yield tick
            tick -= schedule.every
        return
    zone = schedule.zone()
    last = math.inf
    for wall in _walls(schedule, _local_wall(math.floor(now) + 1, zone), forward=False):
        tick = _instant(wall, zone)
        if tick < due:
            return
        if tick <= now and tick < last:
            last = tick
            yield tick


@dataclass(frozen=True)
class FiringPlan:
    ticks: list[float]  # to fire now, earliest first
    next_run_at: float | None
    missed: int  # ticks missed by more than the grace, fired or not


def plan_firing(schedule: Schedule, due: float, now: float) -> FiringPlan:
    """What to fire for a recurring job whose next run ``due`` has come, at storage time ``now``."""
    on_time: list[float] = []
    missed: list[float] = []
    for tick in _ticks_back(schedule, due, now):
        if schedule.end_at is not None and tick > schedule.end_at:
            continue
        (on_time if now - tick <= schedule.misfire_grace else missed).append(tick)
        enough = len(on_time) + len(missed) >= schedule.misfire_cap
        if missed and (schedule.misfire_policy != "run_all" or enough):
            break
    if schedule.misfire_policy == "skip":
        chosen = on_time
    elif schedule.misfire_policy == "run_once":
        chosen = on_time + missed[:1]
    else:
        chosen = on_time + missed
    chosen = sorted(chosen)[-schedule.misfire_cap :]
    return FiringPlan(chosen, next_tick(schedule, max(now, due)), len(missed))
