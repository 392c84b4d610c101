"""The outcome metrics' spool: the serving process sums its pool children's files, keeps the
counts of children that have ended (counters never go down) and skips a file it cannot read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from parallel_scheduler.celery.outcome_metrics import START_LATENESS_BUCKETS, Tallies
from parallel_scheduler.celery.outcome_spool import OutcomeSpool


def ended_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def tallies(queue: str, seconds: float, task: str, state: str) -> Tallies:
    made = Tallies()
    made.observe(queue, seconds)
    made.count(task, state)
    return made


def test_files_of_live_and_ended_children_add_up_and_ended_ones_stay_counted(
    tmp_path: Path,
) -> None:
    spool = OutcomeSpool(tmp_path)
    try:
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            (tmp_path / f"{live.pid}.json").write_text(
                json.dumps(tallies("q", 0.2, "t", "succeeded").to_json())
            )
            gone = tmp_path / f"{ended_pid()}.json"
            gone.write_text(json.dumps(tallies("q", 7200.0, "t", "failed").to_json()))
            (tmp_path / "999999999.json").write_text("{not json")

            first = spool.read()
            assert first.lateness["q"][START_LATENESS_BUCKETS.index(0.25)] == 1
            assert first.lateness["q"][-1] == 1  # past the last bound
            assert first.lateness_sum["q"] == 7200.2
            assert first.outcomes == {("t", "succeeded"): 1, ("t", "failed"): 1}
            assert not gone.exists()  # folded in
            assert spool.read() == first  # and still counted without its file
        finally:
            live.kill()
            live.wait()
    finally:
        spool.close()
    assert not tmp_path.exists()


def test_tallies_round_trip_and_refuse_other_shapes() -> None:
    made = tallies("default", 1.5, "app.add", "retried")
    assert Tallies.from_json(json.loads(json.dumps(made.to_json()))) == made
    for bad in ({}, {"lateness": {"q": [[1], 0.0]}, "outcomes": []}, {"lateness": 3}):
        try:
            Tallies.from_json(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
