"""A recurring job's stored history as shown: triggers marked, entries from rows written before
triggers were recorded (or by hand) read without failing, and a last run that never goes back."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from parallel_scheduler.recurring import history

TICK = 1_764_000_000.0


def test_a_trigger_is_marked_and_a_tick_is_stored_with_the_runs_counted() -> None:
    stored = history.add_history("[]", [(TICK, "r@2025-11-24T16:00:00Z")])
    stored = history.add_history(stored, [(TICK + 5, "r@trigger-x")], trigger=True)
    assert json.loads(stored) == [
        {"tick": TICK, "job_id": "r@2025-11-24T16:00:00Z", "runs": 1},
        {"tick": TICK + 5, "job_id": "r@trigger-x", "trigger": True, "runs": 1},
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
        {"tick": TICK, "job_id": "r@t", "trigger": True, "runs": 0}
    ]


def test_the_last_run_never_goes_back_and_an_unusable_one_is_replaced() -> None:
    assert history.later_run(None, TICK) == TICK
    assert history.later_run(TICK + 30, TICK) == TICK + 30  # a tick caught up after a later trigger
    assert history.later_run(TICK - 30, TICK) == TICK
    assert history.later_run(1e20, TICK) == TICK
    assert history.later_run(float("nan"), TICK) == TICK


def _reference(stored: str, entries: list[tuple[float, str]], trigger: bool) -> str:
    """``add_history`` as first written: decode everything, append (counting each tick later
    than the latest scheduled one kept), encode everything."""
    mark = {"trigger": True} if trigger else {}
    old = [] if stored in ("", "[]") else history.read_history(stored, [])
    runs, last = history.scheduled_runs(old), history.last_scheduled_tick(old)
    added = []
    for at, job_id in entries:
        if not trigger and (last is None or at > last):
            runs, last = runs + 1, at
        added.append({"tick": at, "job_id": job_id, **mark, "runs": runs})
    kept = old + added
    return json.dumps(kept[-history.HISTORY_LIMIT :], separators=(",", ":"))


def test_appending_gives_what_decoding_and_encoding_everything_gives() -> None:
    # Ids with every character that could fool a textual cut: quotes, braces, the entry start
    ids = [
        "r@1",
        'a"},{"tick":9,"job_id":"x',
        'b\\"{"tick":',
        "c}]",
        "ü,{",
        "d@2026-01-01T00:00:00Z",
    ]
    canonical = "[]"
    for n in range(3 * history.HISTORY_LIMIT):
        entries = [(TICK + n + k / 10, ids[(n + k) % len(ids)]) for k in range(1 + n % 3)]
        expected = _reference(canonical, entries, n % 4 == 0)
        canonical = history.add_history(canonical, entries, trigger=n % 4 == 0)
        assert canonical == expected, n
    # Stored text this module did not write: the same entries, whatever the cut
    odd = [
        '[ {"tick": 1.0, "job_id": "a"} ]',
        '[{"job_id":"a","tick":1.0},{"tick":2.0,"job_id":"b"}]',
        '[{"tick":1.0,"job_id":"a","extra":{"tick":5}},{"tick":2.0,"job_id":"b"}]',
        '[{"tick":1.0,"job_id":"a"},{"note":{"tick":3}}]',
        "{not json",
        "[1, 2]",
        "",
    ]
    for stored in odd:
        for count in (1, history.HISTORY_LIMIT - 1, history.HISTORY_LIMIT + 1):
            entries = [(TICK + k, f"r@{k}") for k in range(count)]
            got = history.add_history(stored, entries)
            assert json.loads(got) == json.loads(_reference(stored, entries, False)), stored
    full = _reference("[]", [(TICK + k, f"r@{k}") for k in range(history.HISTORY_LIMIT)], False)
    spaced = full.replace(",", ", ")
    assert json.loads(history.add_history(spaced, [(TICK, "new")])) == json.loads(
        _reference(spaced, [(TICK, "new")], False)
    )


def test_the_runs_count_scheduled_ticks_once_and_survive_the_cut() -> None:
    # scheduled ticks count, a trigger and a tick fired again do not
    stored = history.add_history("[]", [(TICK, "a"), (TICK + 60, "b")])
    stored = history.add_history(stored, [(TICK + 70, "r@trigger-1")], trigger=True)
    stored = history.add_history(stored, [(TICK + 60, "b")])  # a next run moved back
    entries = history.read_history(stored, [])
    assert [entry["runs"] for entry in entries] == [1, 2, 2, 2]
    assert history.scheduled_runs(entries) == 2
    # the count outlives a history cut to triggers only
    for n in range(history.HISTORY_LIMIT + 3):
        stored = history.add_history(stored, [(TICK + 100 + n, f"r@trigger-{n}")], trigger=True)
    assert history.scheduled_runs(history.read_history(stored, [])) == 2
    stored = history.add_history(stored, [(TICK + 120, "c")])
    assert history.scheduled_runs(history.read_history(stored, [])) == 3


def test_entries_written_before_runs_were_counted_are_counted_from_what_is_kept() -> None:
    old = [{"tick": TICK, "job_id": "a"}, {"tick": TICK + 1, "job_id": "t", "trigger": True}]
    assert history.scheduled_runs(old) == 1  # no count kept: the scheduled entries kept
    counted = [{"tick": TICK, "job_id": "a", "runs": 7}, {"tick": TICK + 60, "job_id": "b"}]
    assert history.scheduled_runs(counted) == 8  # one more, fired by an older version
    odd = [{"tick": TICK, "job_id": "a", "runs": True}, {"tick": TICK, "runs": -3}]
    assert history.scheduled_runs(odd) == 2  # unusable counts: the entries are counted
    assert history.last_scheduled_tick(odd) == TICK
    assert history.last_scheduled_tick([{"tick": "soon"}, {"tick": 5.0, "trigger": True}]) is None
