"""The firing path against a brute-force oracle, through every DST transition of 2026-2028.

The oracle knows nothing of the code under test, nor of croniter: it steps through every UTC
second of a window around each transition, reads the zone's wall clock with ``zoneinfo`` and
matches the cron fields with its own small matcher, applying the README's rules: a wall time that
occurs twice fires at its first occurrence only; wall times inside a spring-forward gap fire once,
together, at the transition instant.

The scheduler is simulated pass by pass: each pass runs ``lateness`` seconds after the job's next
run, fires the plan's ticks and stores the plan's next run. Every pass is checked against the
oracle (which ticks fire under the policy, how many were missed, the next run); across passes no
tick fires twice and, when every pass is within the grace, none is lost.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from parallel_scheduler.recurring.misfires import plan_firing
from parallel_scheduler.recurring.triggers import Schedule, next_tick

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute shift
    "Australia/Sydney",
    "America/Santiago",  # clocks change at midnight
    "Pacific/Chatham",  # +12:45/+13:45, changes at 02:45 local
    "Antarctica/Troll",  # +00/+02: a 2-hour shift
]
MINUTE_CRONS = [
    "*/15 * * * *",
    "59 2 * * *",
    "30 1 * * *",
    "0,30 * * * *",
    "45 2 * * *",
    "0 */2 * * *",
    "30 */5 * * * *",
    "15 2 * * 0",  # Sundays only (the day most zones change)
]
SECOND_CRON = "* * * * * *"
GRACE = 60.0
# Within the grace every policy fires the same ticks, and the cap trims none of them: each
# lateness is paired with one policy and cap (so the cases stay few). Late passes try each policy.
ON_TIME = [(0.0, "run_once", 100), (0.5, "skip", 1), (GRACE / 4, "run_all", 1),
           (GRACE / 2, "run_once", 1), (GRACE, "skip", 1)]  # fmt: skip
LATE = [GRACE + 0.5, 3600.0 + 7]  # a scheduler down for a while
LATE_POLICIES = [("skip", 1), ("run_once", 1), ("run_all", 2)]
FIRST_YEAR, LAST_YEAR = 2026, 2028


# ---- the oracle: zoneinfo and a cron matcher of its own --------------------------------------


def _values(text: str, low: int, high: int) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(v) for v in span.split("-"))
        else:
            first = int(span)
            last = high if step else first
        out.update(range(first, last + 1, int(step or 1)))
    return frozenset(out)


@dataclass(frozen=True)
class Cron:
    """Vixie cron semantics: day of month and day of week are ORed when both are restricted."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 and 7 are Sunday
    days_star: bool
    weekdays_star: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        fields = text.split()
        if len(fields) == 5:
            fields = ["0", *fields]
        second, minute, hour, day, month, weekday = fields
        return cls(
            _values(second, 0, 59), _values(minute, 0, 59), _values(hour, 0, 23),
            _values(day, 1, 31), _values(month, 1, 12), _values(weekday, 0, 7),
            day == "*", weekday == "*",
        )  # fmt: skip

    def matches(self, wall: datetime) -> bool:
        if wall.second not in self.seconds or wall.minute not in self.minutes:
            return False
        if wall.hour not in self.hours or wall.month not in self.months:
            return False
        day_ok = wall.day in self.days
        weekday = wall.isoweekday() % 7  # Sunday is 0 (and 7)
        weekday_ok = weekday in self.weekdays or (weekday == 0 and 7 in self.weekdays)
        if self.days_star or self.weekdays_star:
            return day_ok and weekday_ok
        return day_ok or weekday_ok


def _wall(second: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(second, zone).replace(tzinfo=None)


@cache
def transitions(name: str) -> tuple[int, ...]:
    """Every instant the zone's UTC offset changes in 2026-2028 (hourly scan, then bisection)."""
    zone = ZoneInfo(name)
    start = int(datetime(FIRST_YEAR, 1, 1, tzinfo=timezone.utc).timestamp())
    stop = int(datetime(LAST_YEAR + 1, 1, 1, tzinfo=timezone.utc).timestamp())
    found = []
    for hour in range(start, stop, 3600):
        if _wall(hour, zone) - _wall(hour + 3600, zone) != timedelta(hours=-1):
            low, high = hour, hour + 3600
            while high - low > 1:
                middle = (low + high) // 2
                if _wall(middle, zone) - _wall(low, zone) == timedelta(seconds=middle - low):
                    low = middle
                else:
                    high = middle
            found.append(high)
    return tuple(found)


@cache
def _readings(
    name: str, low: int, high: int
) -> tuple[tuple[int, datetime, tuple[datetime, ...]], ...]:
    """For each second of [low, high] whose wall reading is new (its first occurrence): the
    second, its wall time, and the wall times skipped just before it (a spring-forward gap)."""
    zone = ZoneInfo(name)
    latest = max(_wall(s, zone) for s in range(low - 4 * 3600, low, 60))
    out = []
    one = timedelta(seconds=1)
    for second in range(low - 4 * 3600, high + 1):
        wall = _wall(second, zone)
        if wall <= latest:
            continue  # the repeated pass of a fall-back
        skipped: tuple[datetime, ...] = ()
        if wall - latest > one:
            count = int((wall - latest) / one) - 1
            skipped = tuple(latest + one * (i + 1) for i in range(count))
        latest = wall
        if second >= low:
            out.append((second, wall, skipped))
    return tuple(out)


@cache
def oracle(cron: str, name: str, low: int, high: int) -> list[float]:
    matcher = Cron.parse(cron)
    return [
        float(second)
        for second, wall, skipped in _readings(name, low, high)
        if matcher.matches(wall) or any(matcher.matches(w) for w in skipped)
    ]


def test_the_oracle_matches_the_readme_examples() -> None:
    """The oracle itself, on instants worked out by hand from the published rules."""
    berlin_back = utc("2026-10-25T01:00Z")
    assert oracle("30 2 * * *", "Europe/Berlin", berlin_back - 7200, berlin_back + 7200) == [
        utc("2026-10-25T00:30Z")
    ]
    berlin_forward = utc("2026-03-29T01:00Z")
    got = oracle("*/30 * * * *", "Europe/Berlin", berlin_forward - 3600, berlin_forward + 3600)
    assert got == [utc(f"2026-03-29T{t}Z") for t in ("00:00", "00:30", "01:00", "01:30", "02:00")]
    assert transitions("Europe/Berlin")[:2] == (berlin_forward, berlin_back)
    assert {len(transitions(zone)) for zone in ZONES} == {6}


def utc(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


# ---- the firing path, simulated pass by pass -------------------------------------------------


def expected_plan(
    ticks: list[float], due: float, now: float, policy: str, cap: int, catch_up: float | None
) -> tuple[list[float], int]:
    """The README's rules: on-time ticks fire; of the missed, skip fires none, run_once the
    latest, run_all the ``cap`` latest; a tick older than the catch-up window never fires and
    counts as missed. Returns (ticks to fire, missed count)."""
    span = ticks[bisect.bisect_left(ticks, due) : bisect.bisect_right(ticks, now)]
    inside = [t for t in span if catch_up is None or now - t <= catch_up]
    missed = [t for t in span if now - t > GRACE or t not in inside]
    on_time = [t for t in inside if now - t <= GRACE]
    late = [t for t in missed if t in inside]
    kept = {"skip": [], "run_once": late[-1:], "run_all": late[-cap:]}[policy]
    return kept + on_time, len(missed)


def simulate(
    cron: str,
    name: str,
    window: tuple[int, int],
    lateness: float,
    policy: str,
    cap: int,
    catch_up: float | None = None,
) -> None:
    low, high = window
    horizon = high + int(max(LATE)) + 2  # one oracle window per transition, whatever the lateness
    ticks = oracle(cron, name, low, horizon)
    schedule = Schedule(
        cron,
        timezone=name,
        misfire_policy=policy,  # type: ignore[arg-type]
        misfire_cap=cap,
        misfire_grace=GRACE,
        catch_up_window=catch_up,
    )
    due = next_tick(schedule, low - 1)
    fired: list[float] = []
    assert due is not None
    if ticks:
        assert due == ticks[0], f"first tick {due} != oracle {ticks[0]}"
    while due is not None and due <= high:
        now = due + lateness
        plan = plan_firing(schedule, due, now)
        want, missed = expected_plan(ticks, due, now, policy, cap, catch_up)
        assert (plan.ticks, plan.missed) == (want, missed), f"pass at {now} (due {due})"
        later = ticks[bisect.bisect_right(ticks, now) :]
        if later:
            assert plan.next_run_at == later[0], f"next run after the pass at {now}"
        else:
            assert plan.next_run_at is not None and plan.next_run_at > horizon
        fired += plan.ticks
        due = plan.next_run_at
    assert len(fired) == len(set(fired)), "a tick fired twice"
    if lateness <= min(GRACE, catch_up or GRACE):  # every tick before the next run fired
        assert due is not None
        assert fired == [t for t in ticks if t < due]


def _cases() -> list[Any]:
    cases: list[Any] = []
    for name in ZONES:
        for cron in [*MINUTE_CRONS, SECOND_CRON]:
            late = [(lateness, *policy) for lateness in LATE for policy in LATE_POLICIES]
            for lateness, policy, cap in ON_TIME + (late if cron != SECOND_CRON else late[:1]):
                case_id = f"{name}|{cron}|late={lateness:g}|{policy}|cap={cap}"
                cases.append(pytest.param(name, cron, lateness, policy, cap, id=case_id))
    return cases


@pytest.mark.parametrize(("name", "cron", "lateness", "policy", "cap"), _cases())
def test_firing_matches_the_oracle_through_every_transition(
    name: str, cron: str, lateness: float, policy: str, cap: int
) -> None:
    reach = 120 if cron == SECOND_CRON else 3 * 3600
    for transition in transitions(name):
        simulate(cron, name, (transition - reach, transition + reach), lateness, policy, cap)


#: Catch-up windows: shorter than the grace, between the grace and an outage, and longer.
CATCH_UP = [30.0, 1800.0, 7200.0]


@pytest.mark.parametrize("catch_up", CATCH_UP)
@pytest.mark.parametrize(("policy", "cap"), LATE_POLICIES)
@pytest.mark.parametrize("name", ["Europe/Berlin", "Australia/Lord_Howe", "America/Santiago"])
def test_a_catch_up_window_matches_the_oracle_through_every_transition(
    name: str, policy: str, cap: int, catch_up: float
) -> None:
    for cron in ("*/15 * * * *", "0,30 * * * *", "30 */5 * * * *"):
        for lateness in (0.0, GRACE / 2, *LATE):
            for transition in transitions(name):
                simulate(
                    cron, name, (transition - 3 * 3600, transition + 3 * 3600),
                    lateness, policy, cap, catch_up,
                )  # fmt: skip
