"""Cron ticks across DST changes and misfire plans, against instants worked out by hand.

Every expected value below is a UTC instant computed from the zone's published DST rules, not
from the code under test: Europe/Berlin switches at 01:00 UTC (29 Mar / 25 Oct 2026),
America/New_York at 07:00 UTC on 8 Mar and 06:00 UTC on 1 Nov 2026, Australia/Lord_Howe shifts
by 30 minutes at 15:00 UTC on 4 Apr (02:00 LHDT -> 01:30) and 15:30 UTC on 3 Oct 2026
(02:00 LHST -> 02:30).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from parallel_scheduler import InvalidJobError
from parallel_scheduler.recurring import triggers
from parallel_scheduler.recurring.misfires import MISSED_COUNT_LIMIT, plan_firing
from parallel_scheduler.recurring.triggers import Schedule, next_tick


def utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def ticks(cron: str, zone: str, after: str, count: int) -> list[float]:
    schedule, moment, out = Schedule(cron, timezone=zone), utc(after), []
    for _ in range(count):
        tick = next_tick(schedule, moment)
        assert tick is not None
        out.append(tick)
        moment = tick
    return out


@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        # Berlin spring-forward: 02:30 does not exist on 29 Mar; it fires at the jump (03:00 CEST)
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00Z",
         ["2026-03-28T01:30Z", "2026-03-29T01:00Z", "2026-03-30T00:30Z"]),
        # ...and every-30-minutes: 02:00 and 02:30 both fall in the gap and fire once, at 03:00
        ("*/30 * * * *", "Europe/Berlin", "2026-03-29T00:00Z",
         ["2026-03-29T00:30Z", "2026-03-29T01:00Z", "2026-03-29T01:30Z"]),
        # Berlin fall-back: 02:30 happens twice on 25 Oct; it fires once, the first time (CEST)
        ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00Z",
         ["2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
        # ...and every-30-minutes fires nothing in the repeated pass (01:00Z-02:00Z)
        ("*/30 * * * *", "Europe/Berlin", "2026-10-24T23:00Z",
         ["2026-10-24T23:30Z", "2026-10-25T00:00Z", "2026-10-25T00:30Z", "2026-10-25T02:00Z"]),
        # New York spring-forward: 02:30 skipped on 8 Mar -> fires at 03:00 EDT (07:00Z)
        ("30 2 * * *", "America/New_York", "2026-03-07T00:00Z",
         ["2026-03-07T07:30Z", "2026-03-08T07:00Z", "2026-03-09T06:30Z"]),
        # New York fall-back: 01:30 twice on 1 Nov -> once, at 01:30 EDT (05:30Z)
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00Z",
         ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
        # Lord Howe, 30-minute shift back: 01:45 happens twice on 5 Apr -> first (+11:00)
        ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00Z",
         ["2026-04-04T14:45Z", "2026-04-05T15:15Z"]),
        # Lord Howe, 30-minute shift forward: 02:15 skipped on 4 Oct -> fires at 02:30 (15:30Z)
        ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00Z",
         ["2026-10-03T15:30Z", "2026-10-04T15:15Z"]),
        # UTC is untouched by any of this; 6 fields put seconds first
        ("30 2 * * *", "UTC", "2026-03-28T12:00Z", ["2026-03-29T02:30Z", "2026-03-30T02:30Z"]),
        ("*/20 0 0 * * *", "UTC", "2026-05-01T00:00:00Z",
         ["2026-05-01T00:00:20Z", "2026-05-01T00:00:40Z", "2026-05-02T00:00:00Z"]),
    ],
)  # fmt: skip
def test_ticks_across_dst(cron: str, zone: str, after: str, expected: list[str]) -> None:
    assert ticks(cron, zone, after, len(expected)) == [utc(e) for e in expected]


@pytest.mark.parametrize(
    ("zone", "transitions"),
    [
        ("Europe/Berlin", ["2026-03-27T00:00Z", "2026-10-23T00:00Z"]),
        ("America/New_York", ["2026-03-06T00:00Z", "2026-10-30T00:00Z"]),
        ("Australia/Lord_Howe", ["2026-04-02T00:00Z", "2026-10-01T00:00Z"]),
    ],
)
def test_ticks_strictly_increase_through_each_transition(zone: str, transitions: list[str]) -> None:
    for start in transitions:
        every = ticks("*/15 * * * *", zone, start, 4 * 24 * 5)  # five days, every 15 minutes
        assert all(b > a for a, b in itertools.pairwise(every))
        # at most the interval plus the shift (the repeated pass of a fall-back fires nothing)
        assert all(b - a <= 900 + 3600 for a, b in itertools.pairwise(every))


def test_start_and_end_dates_bound_the_ticks() -> None:
    schedule = Schedule(
        "0 * * * *", start_at=utc("2026-01-01T05:30Z"), end_at=utc("2026-01-01T07:00Z")
    )
    assert next_tick(schedule, utc("2026-01-01T00:00Z")) == utc("2026-01-01T06:00Z")
    assert next_tick(schedule, utc("2026-01-01T06:00Z")) == utc("2026-01-01T07:00Z")
    assert next_tick(schedule, utc("2026-01-01T07:00Z")) is None


HOURLY_DUE = utc("2026-01-01T10:00Z")
AFTER_OUTAGE = utc("2026-01-01T15:20Z")


@pytest.mark.parametrize(
    ("policy", "cap", "fired"),
    [
        ("skip", 100, []),
        ("run_once", 100, ["15:00"]),
        ("run_all", 100, ["10:00", "11:00", "12:00", "13:00", "14:00", "15:00"]),
        ("run_all", 3, ["13:00", "14:00", "15:00"]),
    ],
)
def test_misfire_policies_after_an_outage(policy: str, cap: int, fired: list[str]) -> None:
    # Given an hourly job last due at 10:00 and a scheduler back at 15:20
    schedule = Schedule("0 * * * *", misfire_policy=policy, misfire_cap=cap)  # type: ignore[arg-type]
    plan = plan_firing(schedule, HOURLY_DUE, AFTER_OUTAGE)
    assert plan.ticks == [utc(f"2026-01-01T{hhmm}Z") for hhmm in fired]
    assert plan.next_run_at == utc("2026-01-01T16:00Z")
    assert plan.missed == 6  # 10:00 to 15:00 were all missed, fired or not


@pytest.mark.parametrize("policy", ["skip", "run_once", "run_all"])
def test_an_on_time_tick_fires_under_every_policy(policy: str) -> None:
    schedule = Schedule("0 * * * *", misfire_policy=policy)  # type: ignore[arg-type]
    plan = plan_firing(schedule, utc("2026-01-01T15:00Z"), utc("2026-01-01T15:00:00.400Z"))
    assert plan.ticks == [utc("2026-01-01T15:00Z")]
    assert plan.next_run_at == utc("2026-01-01T16:00Z")
    assert plan.missed == 0


def test_the_end_date_stops_catch_up_and_ends_the_schedule() -> None:
    schedule = Schedule("0 * * * *", misfire_policy="run_all", end_at=utc("2026-01-01T12:30Z"))
    plan = plan_firing(schedule, HOURLY_DUE, AFTER_OUTAGE)
    assert plan.ticks == [utc(f"2026-01-01T{h}:00Z") for h in ("10", "11", "12")]
    assert plan.next_run_at is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron"),
        ({"cron": "* * *"}, "5 fields"),
        ({"cron": "not a cron at all x"}, "invalid cron"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "* * * * *", "start_at": 100.0, "end_at": 50.0}, "before the start"),
        ({"cron": "* * * * *", "misfire_cap": 0}, "at least 1"),
        ({"cron": "* * * * *", "misfire_policy": "sometimes"}, "misfire policy"),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        Schedule(**kwargs)  # type: ignore[arg-type]


def test_schedule_round_trips_through_json() -> None:
    schedule = Schedule("0 9 * * 1-5", timezone="Europe/Berlin", misfire_policy="skip")
    assert Schedule.from_json(schedule.to_json()) == schedule


def test_interval_schedules_tick_on_a_fixed_grid() -> None:
    schedule = Schedule(every=90.0, start_at=utc("2026-01-01T00:00Z"))
    assert next_tick(schedule, utc("2025-12-31T00:00Z")) == utc("2026-01-01T00:00Z")
    assert next_tick(schedule, utc("2026-01-01T00:00Z")) == utc("2026-01-01T00:01:30Z")
    assert next_tick(schedule, utc("2026-01-01T00:02:00Z")) == utc("2026-01-01T00:03:00Z")
    plan = plan_firing(
        Schedule(every=600.0, misfire_policy="run_all"),
        utc("2026-01-01T00:00Z"),
        utc("2026-01-01T00:35Z"),
    )
    assert plan.ticks == [utc(f"2026-01-01T00:{m}Z") for m in ("00", "10", "20", "30")]
    assert plan.next_run_at == utc("2026-01-01T00:40Z")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 0.5}, "interval must be from 1 to .* not 0.5"),
        ({"every": 1e300}, "interval must be from 1 to .* not 1e[+]300"),
        ({"every": float("nan")}, "interval must be from 1 to .* not nan"),
        ({"every": "60"}, "interval must be a number"),
        ({"cron": "* * * * *", "every": 60}, "not both"),
        ({"every": 60, "start_at": -1.0}, "start date -1.0 is outside the valid range"),
        ({"every": 60, "end_at": 1e20}, "end date 1e[+]20 is outside the valid range"),
        ({"every": 60, "start_at": float("inf")}, "start date inf is outside"),
        ({"every": 60, "misfire_grace": 1e300}, "misfire grace must be from 0"),
    ],
)
def test_bad_intervals_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        Schedule(**kwargs)  # type: ignore[arg-type]


# ---- issue 9, item 1: first-pass ticks of a fall-back hour, seen from its second pass ----------
# 2027-10-31, Europe/Berlin: 03:00 CEST (01:00Z) -> 02:00 CET; 02:00-02:59 happens twice.
# 2027-11-07, America/New_York: 02:00 EDT (06:00Z) -> 01:00 EST; 01:00-01:59 happens twice.


@pytest.mark.parametrize(
    ("cron", "zone", "policy", "due", "now", "fired", "next_run"),
    [
        # every second: the pass for 02:59:59 CEST runs 0.5 s late, in the repeated hour
        ("* * * * * *", "Europe/Berlin", "run_once", "2027-10-31T00:59:59Z",
         "2027-10-31T01:00:00.500Z", ["2027-10-31T00:59:59Z"], "2027-10-31T02:00:00Z"),
        # 02:59 CEST, a pass 59 s late (inside the grace)
        ("59 2 * * *", "Europe/Berlin", "run_once", "2027-10-31T00:59Z",
         "2027-10-31T01:00:59Z", ["2027-10-31T00:59Z"], "2027-11-01T01:59Z"),
        # 02:45 CEST, run_once, the scheduler back at 01:10Z (02:10 CET)
        ("45 2 * * *", "Europe/Berlin", "run_once", "2027-10-31T00:45Z",
         "2027-10-31T01:10Z", ["2027-10-31T00:45Z"], "2027-11-01T01:45Z"),
        # every 15 minutes, run_all, down from 00:00Z to 01:40Z: 00:45Z (02:45 CEST) too
        ("*/15 * * * *", "Europe/Berlin", "run_all", "2027-10-31T00:00Z", "2027-10-31T01:40Z",
         ["2027-10-31T00:00Z", "2027-10-31T00:15Z", "2027-10-31T00:30Z", "2027-10-31T00:45Z"],
         "2027-10-31T02:00Z"),
        # 01:30 EDT, the pass a second after the clocks went back
        ("30 1 * * *", "America/New_York", "run_once", "2027-11-07T05:30Z",
         "2027-11-07T06:00:01Z", ["2027-11-07T05:30Z"], "2027-11-08T06:30Z"),
    ],
)  # fmt: skip
def test_first_pass_ticks_fire_from_the_repeated_hour(
    cron: str, zone: str, policy: str, due: str, now: str, fired: list[str], next_run: str
) -> None:
    schedule = Schedule(cron, timezone=zone, misfire_policy=policy)  # type: ignore[arg-type]
    assert next_tick(schedule, utc(due) - 1) == utc(due)
    plan = plan_firing(schedule, utc(due), utc(now))
    assert plan.ticks == [utc(t) for t in fired]
    assert plan.next_run_at == utc(next_run)


def test_a_pass_in_the_repeated_hour_does_not_walk_through_it_second_by_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an every-second schedule due at the last first-pass second, seen from the second pass,
    # and every cron wall time the planner walks counted
    schedule = Schedule("* * * * * *", timezone="Europe/Berlin")
    due, now = utc("2027-10-31T00:59:59Z"), utc("2027-10-31T01:30:00Z")
    walked = 0
    walls = triggers._walls

    def counted(*args: Any, **kwargs: Any) -> Iterator[datetime]:
        nonlocal walked
        for wall in walls(*args, **kwargs):
            walked += 1
            yield wall

    monkeypatch.setattr(triggers, "_walls", counted)
    # When planned (and the next tick asked for, 30 minutes into the repeated hour)
    plan = plan_firing(schedule, due, now)
    # Then the 59:59 tick is the missed one, the next run is 03:00 CET, and it took a few steps,
    # not the 1,800 repeated seconds walked one by one
    assert (plan.ticks, plan.missed, plan.next_run_at) == ([due], 1, utc("2027-10-31T02:00Z"))
    assert walked <= 10, walked


# ---- issue 9, item 2: the cap is run_all's, for missed ticks; ticks within the grace all fire --


@pytest.mark.parametrize(
    ("policy", "cap", "fired"),
    [
        ("run_once", 2, 7),  # six on time and the latest missed one
        ("skip", 1, 6),  # the six on time
        ("run_all", 1, 7),  # six on time and one missed
        ("run_all", 3, 9),
    ],
)
def test_the_cap_never_trims_ticks_within_the_grace(policy: str, cap: int, fired: int) -> None:
    # Given an every-10-seconds job due 5 minutes ago, a pass now with a 55 s grace
    schedule = Schedule(
        "*/10 * * * * *",
        misfire_policy=policy,  # type: ignore[arg-type]
        misfire_cap=cap,
        misfire_grace=55,
    )
    now = utc("2026-01-01T12:00:00Z")
    plan = plan_firing(schedule, now - 300, now)
    # Then the six ticks of the last 55 s fire, whatever the cap; 25 are counted as missed
    on_time = [now - 50 + 10 * i for i in range(6)]
    assert plan.ticks[-6:] == on_time
    assert len(plan.ticks) == fired
    assert plan.missed == 25


def test_missed_ticks_are_counted_up_to_a_bound() -> None:
    every_second = Schedule("* * * * * *", misfire_policy="skip", misfire_grace=0)
    now = utc("2026-01-01T12:00:00Z")
    assert plan_firing(every_second, now - 3600, now).missed == 3600
    assert plan_firing(every_second, now - 86400, now).missed == MISSED_COUNT_LIMIT
    hourly = Schedule(every=3600.0, misfire_policy="run_once", misfire_grace=0)
    plan = plan_firing(hourly, now - 25 * 3600, now - 1)
    assert (plan.ticks, plan.missed) == ([now - 3600], 25)


# ---- issue 9, item 4: a schedule that can never fire is refused ---------------------------------


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "30 2 30 2 *", "0 0 0 31 4 *", "0 0 31 11 *"])
def test_a_cron_that_never_fires_is_refused(cron: str) -> None:
    with pytest.raises(InvalidJobError, match=re.escape(f"cron {cron!r} never fires")):
        Schedule(cron)


def test_a_cron_that_fires_only_in_leap_years_is_accepted() -> None:
    schedule = Schedule("0 0 29 2 *")
    assert next_tick(schedule, utc("2026-01-01T00:00Z")) == utc("2028-02-29T00:00Z")


def test_dates_that_leave_no_tick_between_them_are_refused() -> None:
    with pytest.raises(InvalidJobError, match=r"'0 9 1 \* \*' .* never fires between"):
        Schedule("0 9 1 * *", start_at=utc("2026-01-02T00:00Z"), end_at=utc("2026-01-31T00:00Z"))
    assert Schedule("0 9 1 * *", start_at=utc("2026-01-02T00:00Z"), end_at=utc("2026-02-01T09:00Z"))


def test_a_schedule_takes_only_its_cron_by_position() -> None:
    # When a time zone follows the cron by position, Then the constructor refuses: name it
    with pytest.raises(TypeError, match="positional"):
        Schedule("0 9 * * *", "Europe/Berlin")  # type: ignore[call-arg]
    assert Schedule("0 9 * * *", timezone="Europe/Berlin").timezone == "Europe/Berlin"
