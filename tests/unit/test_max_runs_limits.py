"""``max_runs`` as pure functions: the check every entry point shares, text as typed, a plan cut
to the runs left (a tick fired again not counted), the stored schedule (without a limit stored
exactly as before), and the count as listings show it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parallel_scheduler import InvalidJobError
from parallel_scheduler.recurring.history import add_history
from parallel_scheduler.recurring.limits import limit_plan, runs_text
from parallel_scheduler.recurring.max_runs import MAX_RUNS_LIMIT, check_max_runs, max_runs_arg
from parallel_scheduler.recurring.misfires import FiringPlan
from parallel_scheduler.recurring.triggers import Schedule

TICK = 1_764_000_000.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, 2.0, "x", "3", True, False, MAX_RUNS_LIMIT + 1])
def test_a_bad_limit_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(InvalidJobError, match="max runs must be a whole number") as error:
        check_max_runs(bad)
    assert repr(bad) in str(error.value)
    with pytest.raises(InvalidJobError, match="max runs"):
        Schedule("* * * * *", max_runs=bad)


def test_a_good_limit_or_none_is_kept() -> None:
    assert [check_max_runs(v) for v in (None, 1, 3, MAX_RUNS_LIMIT)] == [None, 1, 3, MAX_RUNS_LIMIT]


@pytest.mark.parametrize(
    ("text", "read"),
    [(None, None), ("", None), ("  ", None), ("3", 3), (" 7 ", 7), ("-1", -1), ("0", 0),
     ("1.5", "1.5"), ("x", "x"), ("True", "True"), ("٣", "٣")],
)  # fmt: skip
def test_text_as_typed_is_read_as_a_number_only_when_it_spells_one(text: Any, read: Any) -> None:
    assert max_runs_arg(text) == read


def _history(*ticks: float) -> str:
    return add_history("[]", [(tick, f"r@{tick}") for tick in ticks])


def test_a_plan_is_cut_to_the_runs_left_and_ends_the_job() -> None:
    plan = FiringPlan([TICK + 60 * k for k in range(10)], TICK + 600, 9)
    assert limit_plan(plan, None, "[]") is plan
    assert limit_plan(plan, 11, "[]") is plan  # room for all: it goes on
    four = limit_plan(plan, 4, "[]")
    assert (four.ticks, four.next_run_at, four.missed) == (plan.ticks[:4], None, 9)
    exact = limit_plan(plan, 12, _history(TICK - 120, TICK - 60))
    assert (exact.ticks, exact.next_run_at) == (plan.ticks, None)  # the last runs: ended
    done = limit_plan(plan, 2, _history(TICK - 120, TICK - 60))
    assert (done.ticks, done.next_run_at) == ([], None)


def test_a_tick_fired_again_is_not_counted_against_the_limit() -> None:
    plan = FiringPlan([TICK, TICK + 60], TICK + 120, 0)
    again = limit_plan(plan, 2, _history(TICK))  # TICK fired and counted already
    assert (again.ticks, again.next_run_at) == ([TICK, TICK + 60], None)
    going = limit_plan(plan, 3, _history(TICK))
    assert going is plan


def test_a_schedule_without_a_limit_is_stored_as_before_and_old_text_reads() -> None:
    assert "max_runs" not in json.loads(Schedule("* * * * *").to_json())
    limited = Schedule("* * * * *", max_runs=3)
    assert json.loads(limited.to_json())["max_runs"] == 3
    assert Schedule.from_json(limited.to_json()) == limited
    old = '{"cron":"0 * * * *","timezone":"UTC","misfire_policy":"run_once"}'
    assert Schedule.from_json(old).max_runs is None


def test_the_count_is_shown_with_its_limit_and_ended() -> None:
    assert [runs_text(12, None), runs_text(2, 3), runs_text(3, 3)] == [
        "12",
        "2 of 3",
        "3 of 3 (ended)",
    ]
