"""Cron schedules: next ticks across time zones and DST changes (what to fire after a misfire:
``misfires.py``).

Pure functions of (schedule, time): no I/O and no clock of their own, so every rule here is
tested with exact expected instants (and against a brute-force oracle,
tests/unit/test_dst_oracle.py).

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

With these rules the instant of a wall-clock time never decreases as the wall time grows, so the
ticks at or before an instant ``m`` are exactly the cron wall times at or before the *latest wall
reading shown at any instant up to m* (``_latest_wall``). That is the wall of ``m`` itself, except
in the repeated pass of a fall-back, where it is the wall just before the transition: walking from
the wall of ``m`` instead would miss the first-pass ticks whose wall time is later (issue 9).
"""

from __future__ import annotations

import copy
import json
import math
import zoneinfo
from collections.abc import Iterator
from dataclasses import KW_ONLY, asdict, dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from parallel_scheduler.calendars import check_exclude
from parallel_scheduler.errors import InvalidJobError
from parallel_scheduler.jitter import check_jitter, jitter_offset
from parallel_scheduler.ranges import MAX_INTERVAL, check_instant, check_interval, shown
from parallel_scheduler.recurring import overlap_policy
from parallel_scheduler.recurring.max_runs import check_max_runs

__all__ = [
    "MISFIRE_POLICIES",
    "Schedule",
    "firing_due_at",
    "next_tick",
    "ticks_back",
    "zone_names",
]

MisfirePolicy = Literal["skip", "run_once", "run_all"]
MISFIRE_POLICIES: tuple[MisfirePolicy, ...] = ("skip", "run_once", "run_all")
_MAX_STEPS = 100_000  # bound on cron iterations for one question; a real schedule needs few
#: No zone has turned its clocks back by a day or more since 1970, so the repeated pass of a
#: fall-back ends within this many seconds of the transition.
_MAX_FALL_BACK = 86_400
#: Keys ``zoneinfo`` lists or loads that name no IANA zone the same everywhere: ``localtime`` (a
#: copy of the machine's ``/etc/localtime``), ``Factory`` (the tz database's "no zone set"
#: placeholder), ``posixrules`` (a template), and the ``posix/``/``right/`` trees (copies, and
#: leap-second clocks). A schedule in one of them would fire at other instants on another host.
MACHINE_ZONE_KEYS = frozenset({"localtime", "Factory", "posixrules"})


@lru_cache(maxsize=1)
def zone_names() -> frozenset[str]:
    """The IANA zone names a schedule may use: those this machine's tz database (or the
    ``tzdata`` package) holds, but for ``MACHINE_ZONE_KEYS``."""
    return frozenset(
        name
        for name in zoneinfo.available_timezones()
        if name not in MACHINE_ZONE_KEYS and not name.startswith(("posix/", "right/"))
    )


_HOUR = 3600
#: Distinct schedules (and schedule, instant pairs) kept worked out: 100,000 recurring jobs of
#: 15,000 crons and zones saved or fired together still hit the caches (a few MB).
SCHEDULE_CACHE = 65_536


@dataclass(frozen=True)
class Schedule:
    """When a recurring job fires.

    ``misfire_policy`` says what happens to ticks missed by more than ``misfire_grace`` seconds
    (no scheduler ran, or the job was due while the store was down): ``skip`` fires none of
    them; ``run_once`` (the default) fires one firing for all of them (the latest missed tick);
    ``run_all`` fires each, up to the ``misfire_cap`` most recent. Ticks within the grace are
    on time and fire, whatever the policy and the cap. A tick older than ``catch_up_window``
    seconds (when set) never fires, whatever the policy (``misfires.py``). ``jitter`` seconds
    spread each tick's firing over ``[tick, tick + jitter)``, below the next tick (``jitter.py``).
    ``max_runs`` ends the job after that many scheduled firings (``limits.py``). ``overlap``
    says what a tick does while an earlier firing runs (``overlap_policy.py``, ``overlap.py``);
    ``pause_after_failures`` pauses the job after that many failed firings (``failure_pause.py``).

    Only the cron is positional (``Schedule("0 9 * * 1-5", timezone="Europe/Berlin")``,
    ``Schedule(every=90.0)``): ten settings cannot be passed in the wrong order.
    """

    cron: str = ""
    _: KW_ONLY
    timezone: str = "UTC"
    start_at: float | None = None
    end_at: float | None = None
    misfire_policy: MisfirePolicy = "run_once"
    misfire_cap: int = 100
    misfire_grace: float = 60.0
    every: float | None = None  # an interval in seconds instead of a cron expression
    jitter: float = 0.0
    catch_up_window: float | None = None
    max_runs: int | None = None  # the job ends after this many scheduled firings (limits.py)
    exclude: tuple[str, ...] = ()  # names of calendars of excluded dates (calendars.py)
    overlap: overlap_policy.OverlapPolicy = "allow"  # a tick while an earlier firing runs
    overlap_timeout: float = overlap_policy.DEFAULT_OVERLAP_TIMEOUT  # then counted as finished
    pause_after_failures: int | None = None  # paused after this many failed firings in a row

    def __post_init__(self) -> None:
        if self.every is not None:
            self._check_interval()
        else:
            self._check_cron()
        self.zone()
        self._check_bounds()
        self._check_fires()
        object.__setattr__(self, "exclude", check_exclude(self.exclude))  # a list: a tuple

    def _check_interval(self) -> None:
        if self.cron:
            raise InvalidJobError("give a cron expression or an interval, not both")
        check_interval("interval", self.every)

    def _check_cron(self) -> None:
        if not isinstance(self.cron, str) or len(self.cron.split()) not in (5, 6):
            raise InvalidJobError(
                f"cron {self.cron!r} must have 5 fields (minute hour day month weekday) "
                "or 6 with seconds first"
            )
        try:
            _parsed(self.cron)
        except (CroniterBadCronError, ValueError, KeyError) as exc:
            raise InvalidJobError(f"invalid cron {self.cron!r}: {exc}") from None
        if not _ever_fires(self.cron):
            raise InvalidJobError(
                f"cron {self.cron!r} never fires: no date matches it (such as 30 February)"
            )

    def _check_bounds(self) -> None:
        for name, label in (("start_at", "start date"), ("end_at", "end date")):
            if getattr(self, name) is not None:
                check_instant(label, getattr(self, name))
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
        grace = self.misfire_grace
        if (
            isinstance(grace, bool)
            or not isinstance(grace, (int, float))
            or not 0 <= grace <= MAX_INTERVAL
        ):
            raise InvalidJobError(
                f"misfire grace must be from 0 to {MAX_INTERVAL:g} seconds, not {grace!r}"
            )
        check_jitter(self.jitter)
        if self.catch_up_window is not None:
            check_interval("catch-up window", self.catch_up_window)
        check_max_runs(self.max_runs)
        overlap_policy.check_schedule(self)

    def _check_fires(self) -> None:
        """Refuse start/end dates that leave no tick at all between them."""
        if self.start_at is None or self.end_at is None:
            return
        if next_tick(self, math.nextafter(self.start_at, -math.inf)) is None:
            raise InvalidJobError(
                f"schedule {self.describe()} never fires between its start date "
                f"{_iso(self.start_at)} and its end date {_iso(self.end_at)}"
            )

    def describe(self) -> str:
        """The schedule in a few words, for error messages."""
        if self.every is not None:
            return f"every {self.every:g} s"
        return f"{self.cron!r} ({self.timezone})"

    def zone(self) -> ZoneInfo:
        """The schedule's IANA zone; a key that is none (``localtime``, ``Factory``,
        ``posixrules``: see ``MACHINE_ZONE_KEYS``) or is unknown is refused, naming it."""
        name = self.timezone
        if isinstance(name, str) and name in MACHINE_ZONE_KEYS:
            raise InvalidJobError(
                f"time zone {shown(name)} is not an IANA zone name: it stands for this machine's "
                "own zone, or for none (use an IANA name such as Europe/Berlin, or UTC)"
            )
        try:
            if not isinstance(name, str) or name not in zone_names():
                raise ZoneInfoNotFoundError(name)
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            message = f"unknown time zone {shown(name)} (use an IANA name)"
            raise InvalidJobError(message) from None

    def to_json(self) -> str:
        """The schedule as stored: a compact JSON object of its fields (``from_json`` reads it)."""
        return _schedule_json(self)

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """The stored schedule, validated again: ``InvalidJobError`` if it is unusable. A
        schedule is immutable, so one text is read once (``_stored_schedule``)."""
        return _stored_schedule(text)

    @classmethod
    def _read(cls, text: str) -> Schedule:
        try:
            fields = json.loads(text)
            if not isinstance(fields, dict):
                raise TypeError(f"a JSON object is expected, not {type(fields).__name__}")
            return cls(**fields)
        except (ValueError, TypeError) as exc:
            raise InvalidJobError(f"stored schedule {text!r} is unusable: {exc}") from None


#: Fields added after schedules were first stored, with their defaults: left out of the stored
#: text at those, so a schedule that does not use them is stored exactly as before.
_ADDED: dict[str, object] = {
    "jitter": 0.0,
    "catch_up_window": None,
    "max_runs": None,
    "exclude": (),
    "overlap": "allow",
    "overlap_timeout": overlap_policy.DEFAULT_OVERLAP_TIMEOUT,
    "pause_after_failures": None,
}


@lru_cache(maxsize=SCHEDULE_CACHE)
def _schedule_json(schedule: Schedule) -> str:
    fields = {k: v for k, v in asdict(schedule).items() if k not in _ADDED or v != _ADDED[k]}
    return json.dumps(fields, separators=(",", ":"))


@lru_cache(maxsize=SCHEDULE_CACHE)
def _stored_schedule(text: str) -> Schedule:
    return Schedule._read(text)


def _iso(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


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


@lru_cache(maxsize=4096)
def _parsed(cron: str) -> croniter:
    """A parsed expression to copy: parsing costs three times what copying does."""
    return croniter(cron, datetime(2000, 1, 1), second_at_beginning=True)


@lru_cache(maxsize=4096)
def _ever_fires(cron: str) -> bool:
    """False for an expression no date matches (30 February). croniter searches years ahead,
    so 29 February (every fourth year) is found."""
    iterator = copy.copy(_parsed(cron))
    iterator.set_current(datetime(2000, 1, 1), force=True)
    try:
        iterator.get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


def _walls(schedule: Schedule, start: datetime, forward: bool) -> Iterator[datetime]:
    """Cron wall times strictly after (or strictly before) the wall time ``start``."""
    iterator = copy.copy(_parsed(schedule.cron))  # each walk its own position: thread-safe
    iterator.set_current(start, force=True)
    step = iterator.get_next if forward else iterator.get_prev
    for _ in range(_MAX_STEPS):
        try:
            yield step(datetime)
        except CroniterBadDateError:  # no such date ever (e.g. 30 February)
            return


def _local_wall(epoch: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)


def _offset(epoch: int, zone: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(epoch, zone).utcoffset()


@lru_cache(maxsize=8192)
def _fall_back_in_hour(zone: ZoneInfo, hour: int) -> int | None:
    """The instant (whole second) the clocks go back within hour number ``hour`` since the
    epoch, or None. Cached: each hour of each zone is looked at once per process."""
    low, high = hour * _HOUR, (hour + 1) * _HOUR
    before = _offset(low, zone)
    after = _offset(high, zone)
    if before is None or after is None or after >= before:
        return None
    while high - low > 1:  # the first second with the later (smaller) offset
        middle = (low + high) // 2
        if _offset(middle, zone) == after:
            high = middle
        else:
            low = middle
    return high


def _latest_wall(moment: float, zone: ZoneInfo) -> datetime:
    """The latest whole-second wall-clock reading shown at any instant at or before ``moment``.

    It is the wall of ``moment``, or, in the repeated pass after a fall-back at ``T``, the wall
    of ``T - 1`` (the last second before the clocks went back), which reads later.
    """
    base = math.floor(moment)
    latest = _local_wall(base, zone)
    for hour in range((base - _MAX_FALL_BACK) // _HOUR, base // _HOUR + 1):
        transition = _fall_back_in_hour(zone, hour)
        if transition is not None and transition - 1 <= base:
            latest = max(latest, _local_wall(transition - 1, zone))
    return latest


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


@lru_cache(maxsize=SCHEDULE_CACHE)
def next_tick(schedule: Schedule, after: float) -> float | None:
    """The first tick strictly after ``after`` within the start/end dates, or ``None``. Cached:
    a bulk save asks it for thousands of recurring jobs of a few schedules at one instant."""
    zone = schedule.zone()
    if schedule.start_at is not None and after < schedule.start_at:
        after = math.nextafter(schedule.start_at, -math.inf)
    if schedule.every is not None:
        tick = _interval_tick(schedule, after, after=True)
        return None if schedule.end_at is not None and tick > schedule.end_at else tick
    # Every wall time after the latest one shown so far fires after `after` (module docstring).
    for wall in _walls(schedule, _latest_wall(after, zone), forward=True):
        tick = _instant(wall, zone)
        if schedule.end_at is not None and tick > schedule.end_at:
            return None
        if tick > after:
            return tick
    return None


def firing_due_at(recurring_id: str, schedule: Schedule, tick: float) -> float:
    """When the firing of ``tick`` is due: the tick, moved by the schedule's jitter (below the
    gap to the next tick); the same for a scheduled firing and a backfill of the same tick."""
    if not schedule.jitter:
        return tick
    following = next_tick(schedule, tick)
    room = math.inf if following is None else following - tick
    return tick + jitter_offset(recurring_id, tick, schedule.jitter, room)


def ticks_back(schedule: Schedule, due: float, now: float) -> Iterator[float]:
    """Ticks in ``[due, now]``, latest first, each once."""
    if schedule.every is not None:
        tick = _interval_tick(schedule, now, after=False)
        while tick >= due:
            yield tick
            tick -= schedule.every
        return
    zone = schedule.zone()
    last = math.inf
    start = _latest_wall(now, zone) + timedelta(seconds=1)  # walls strictly before: <= latest
    for wall in _walls(schedule, start, forward=False):
        tick = _instant(wall, zone)
        if tick < due:
            return
        if tick <= now and tick < last:
            last = tick
            yield tick
