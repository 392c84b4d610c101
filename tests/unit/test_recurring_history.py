"""A recurring job's stored history as shown: triggers marked, entries from rows written before
triggers were recorded (or by hand) read without failing, and a last run that never goes back."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from parallel_scheduler.recurring import history

TICK = 1_764_000_000.0


def test_a_trigger_is_marked_and_a_tick_is_stored_as_before() -> None:
    stored = history.add_history("[]", [(TICK, "r@2025-11-24T16:00:00Z")])
    stored = history.add_history(stored, [(TICK + 5, "r@trigger-x")], trigger=True)
    assert json.loads(stored) == [
        {"tick": TICK, "job_id": "r@2025-11-24T16:00:00Z"},
        {"tick": TICK + 5, "job_id": "r@trigger-x", "trigger": True},
    ]
    newest, oldest = history.recent_firings(history.read_history(stored, []))
    assert newest == history.RecentFiring(
        "r@trigger-x", datetime.fromtimestamp(TICK + 5, tz=timezone.utc), True
    )
    assert (oldest.trigger, newest.describe(), oldest.describe()) == (
        False,
        "r@trigger-x (triggered)",
        "r@2025-11-24T16:00:00Z",
    )


def test_only_the_newest_entries_are_kept() -> None:
    limit = history.HISTORY_LIMIT
    stored = history.add_history("[]", [(TICK + i, f"r@{i}") for i in range(limit + 3)])
    kept = history.read_history(stored, [])
    assert len(kept) == limit and kept[-1]["job_id"] == f"r@{limit + 2}"


def test_entries_this_version_cannot_use_are_shown_empty_not_raised() -> None:
    entries = [{"tick": "soon", "job_id": 7}, {"tick": 1e300}, {"trigger": "yes"}, {}]
    shown = history.recent_firings(entries)
    assert shown == [history.RecentFiring(None, None, False)] * 4
    assert shown[0].to_dict() == {
        "job_id": None,
        "at": None,
        "trigger": False,
    }


def test_an_unreadable_history_is_flagged_on_reading_and_started_afresh_on_writing() -> None:
    problems: list[str] = []
    assert history.read_history("{not json", problems) == [] and "unreadable" in problems[0]
    assert history.read_history('{"a": 1}', problems) == [] and "not a list" in problems[1]
    assert json.loads(history.add_history("{not json", [(TICK, "r@t")], trigger=True)) == [
        {"tick": TICK, "job_id": "r@t", "trigger": True}
    ]


def test_the_last_run_never_goes_back_and_an_unusable_one_is_replaced() -> None:
    assert history.later_run(None, TICK) == TICK
    assert history.later_run(TICK + 30, TICK) == TICK + 30  # a tick caught up after a later trigger
    assert history.later_run(TICK - 30, TICK) == TICK
    assert history.later_run(1e20, TICK) == TICK
    assert history.later_run(float("nan"), TICK) == TICK
