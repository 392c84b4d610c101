"""``list``, ``show``, ``status`` and ``recurring list`` show every stored row, flagging the ones
this version cannot read, on every backend: a due time out of range (``1e20``, ``-1e12``), NaN, a
payload that is not JSON, a recurring schedule that no longer parses. The rows are written the
way an older version or a hand edit leaves them: good rows through the storage API, then spoiled
with raw SQL or raw Redis commands.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

import storage_adapters
from parallel_scheduler.cli import main
from parallel_scheduler.jobs import Job
from parallel_scheduler.recurring.jobs import RecurringJob
from storage_adapters import NewJob, NewRecurring, Storage
from tests.conftest import storage_url, unique_prefix

GOOD_PAYLOAD = '{"args":[1],"kwargs":{},"options":{}}'
GOOD_SCHEDULE = json.dumps({"cron": "", "every": 60.0, "timezone": "UTC"})


def _spoil_sql(url: str, table: str, row_id: str, values: dict[str, Any]) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            columns = ", ".join(f"{name} = :{name}" for name in values)
            conn.execute(
                sa.text(f"UPDATE {table} SET {columns} WHERE id = :id"), {**values, "id": row_id}
            )
    finally:
        engine.dispose()


class Spoiler:
    """Writes a value no current entry point accepts straight into a stored row."""

    def __init__(self, kind: str, url: str, prefix: str) -> None:
        self.kind, self.url, self.prefix = kind, url, prefix

    def job(self, job_id: str, **values: Any) -> None:
        if self.kind == "redis":
            self._redis_hash(f"{{{self.prefix}}}:job:{job_id}", values)
            if "due_at" in values and math.isfinite(values["due_at"]):
                client = redis.Redis.from_url(self.url)
                for index in ("all", "schedule"):  # the due-time indexes follow the hash
                    if client.zscore(f"{{{self.prefix}}}:{index}", job_id) is not None:
                        client.zadd(f"{{{self.prefix}}}:{index}", {job_id: values["due_at"]})
                client.close()
        else:
            _spoil_sql(self.url, f"{self.prefix}_jobs", job_id, values)

    def recurring(self, recurring_id: str, **values: Any) -> None:
        if self.kind == "redis":
            self._redis_hash(f"{{{self.prefix}}}:rec:{recurring_id}", values)
        else:
            _spoil_sql(self.url, f"{self.prefix}_recurring", recurring_id, values)

    def _redis_hash(self, key: str, values: dict[str, Any]) -> None:
        client = redis.Redis.from_url(self.url)
        assert client.exists(key), key
        client.hset(
            key, mapping={k: repr(v) if isinstance(v, float) else v for k, v in values.items()}
        )
        client.close()


@pytest.fixture
def spoiled(adapter_kind: str, tmp_path: Path) -> Iterator[tuple[list[str], dict[str, str]]]:
    """A store with good and bad rows: the CLI arguments to reach it, and each row's defect."""
    url = storage_url(adapter_kind, tmp_path)
    prefix = unique_prefix()
    storage: Storage = storage_adapters.from_url(url, prefix=prefix)
    storage.setup()
    now = storage.now()
    defects = {
        "good": "",
        "far-future": "due_at 1e20",
        "before-1970": "due_at -1e12",
        "not-json": "payload",
    }
    if adapter_kind != "sqlite":  # SQLite stores NaN as NULL, which NOT NULL refuses
        defects["not-a-number"] = "due_at nan"
    storage.add_jobs([NewJob(job_id, "t.x", GOOD_PAYLOAD, now + 60) for job_id in defects])
    for recurring_id in ("rec-good", "rec-bad-schedule", "rec-far"):
        storage.save_recurring(
            NewRecurring(recurring_id, "t.r", GOOD_PAYLOAD, GOOD_SCHEDULE, True, now + 60),
            "create",
        )
    spoil = Spoiler(adapter_kind, url, prefix)
    spoil.job("far-future", due_at=1e20)
    spoil.job("before-1970", due_at=-1e12)
    spoil.job("not-json", payload="{not json")
    if "not-a-number" in defects:
        spoil.job("not-a-number", due_at=float("nan"))
    spoil.recurring("rec-bad-schedule", schedule='{"cron": ')
    spoil.recurring("rec-far", next_run_at=1e20)
    defects.update({"rec-good": "", "rec-bad-schedule": "schedule", "rec-far": "next_run_at"})
    try:
        yield ["--log-level", "WARNING", "--storage-url", url, "--prefix", prefix], defects
    finally:
        storage.drop()
        storage.close()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    return code, out


def _jobs(defects: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in defects.items() if not k.startswith("rec-")}


def test_list_shows_every_row_and_flags_the_bad_ones(
    spoiled: tuple[list[str], dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    cli, defects = spoiled
    jobs = _jobs(defects)
    _, out = run_cli([*cli, "list", "--json"], capsys)
    shown = {row["id"]: row for row in json.loads(out)}  # strict JSON: no NaN got through
    assert set(shown) == set(jobs)
    for job_id, defect in jobs.items():
        problem = shown[job_id]["problem"]
        assert (problem is None) == (not defect), (job_id, problem)
        assert not defect or defect.split()[0] in problem, (job_id, problem)
    _, out = run_cli([*cli, "list"], capsys)
    header, *rows = [line.split("\t") for line in out.splitlines()]
    assert header[-1] == "problem"
    flagged = {row[0]: row[-1] for row in rows}
    assert set(flagged) == set(jobs)
    assert {job_id for job_id, problem in flagged.items() if problem != "-"} == {
        job_id for job_id, defect in jobs.items() if defect
    }


def test_show_and_status_never_fail_on_a_bad_row(
    spoiled: tuple[list[str], dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    cli, defects = spoiled
    for job_id, defect in _jobs(defects).items():
        _, out = run_cli([*cli, "show", job_id, "--json"], capsys)
        assert json.loads(out)["id"] == job_id
        _, out = run_cli([*cli, "show", job_id], capsys)
        fields = dict(line.split(None, 1) for line in out.splitlines())
        assert fields["id"] == job_id
        assert (fields["problem"] == "-") == (not defect), (job_id, fields["problem"])
    _, out = run_cli([*cli, "status", "--json"], capsys)
    report = json.loads(out)
    assert report["counts"]["scheduled"] == len(_jobs(defects))
    # the earliest due time is the one before 1970: shown raw and flagged
    assert report["next_due_at"] == repr(-1e12) and "outside the valid range" in report["problem"]
    assert report["next_due_in_seconds"] is None
    _, out = run_cli([*cli, "status"], capsys)
    assert "next due: -1000000000000.0" in out and "problem: " in out


def test_recurring_list_shows_every_row_and_flags_the_bad_ones(
    spoiled: tuple[list[str], dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    cli, defects = spoiled
    recurring = {k: v for k, v in defects.items() if k.startswith("rec-")}
    _, out = run_cli([*cli, "recurring", "list", "--json"], capsys)
    shown = {row["id"]: row for row in json.loads(out)}
    assert set(shown) == set(recurring)
    for recurring_id, defect in recurring.items():
        problem = shown[recurring_id]["problem"]
        assert (problem is None) == (not defect), (recurring_id, problem)
        assert not defect or defect in problem, (recurring_id, problem)
    _, out = run_cli([*cli, "recurring", "list"], capsys)
    header, *rows = [line.split("\t") for line in out.splitlines()]
    assert header[-1] == "problem"
    flagged = {row[0]: row[-1] for row in rows}
    assert set(flagged) == set(recurring)
    assert flagged["rec-good"] == "-" and flagged["rec-bad-schedule"] != "-"


def test_rows_are_shown_even_when_the_model_cannot_read_them(
    spoiled: tuple[list[str], dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given models that fail on every row (as an older Job did on a due time out of range)
    def unreadable(record: object) -> object:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(Job, "from_record", unreadable)
    monkeypatch.setattr(RecurringJob, "from_record", unreadable)
    cli, defects = spoiled
    # Then the CLI still shows every row, field by field, saying what it found wrong
    _, out = run_cli([*cli, "list", "--json"], capsys)
    shown = {row["id"]: row for row in json.loads(out)}
    assert set(shown) == set(_jobs(defects))
    assert (
        shown["good"]["problem"]
        == "cannot be read as a job (OverflowError: date value out of range)"
    )
    assert shown["good"]["args"] == [1]
    assert "due_at 1e+20 is outside the valid range" in shown["far-future"]["problem"]
    assert shown["far-future"]["due_at"] == "1e+20"
    assert "payload cannot be decoded" in shown["not-json"]["problem"]
    if "not-a-number" in shown:
        assert "due_at nan is outside the valid range" in shown["not-a-number"]["problem"]
    _, out = run_cli([*cli, "show", "before-1970"], capsys)
    assert "due_at -1000000000000.0 is outside the valid range" in out
    _, out = run_cli([*cli, "recurring", "list", "--json"], capsys)
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows["rec-good"]["every"] == 60.0 and rows["rec-good"]["problem"].startswith(
        "cannot be read as a recurring job"
    )
    assert "next_run_at 1e+20 is outside the valid range" in rows["rec-far"]["problem"]
