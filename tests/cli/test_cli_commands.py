"""The job commands as a user runs them: schedule (also of an existing id), show, reschedule,
cancel, --json, --version, which store a command opened, read-only commands that must not create
one, ids that stay whole when output is piped, bad instants refused at the parser, and
``run --once`` exiting non-zero when a job could not be sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import storage_adapters
from parallel_scheduler import JobState, __version__
from parallel_scheduler.cli import jobs as cli_jobs
from parallel_scheduler.cli import main
from storage_adapters import list_jobs
from tests.loopback import CountingListener


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


@pytest.fixture
def store(db: Path) -> list[str]:
    return ["--storage-url", f"sqlite:///{db}"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--log-level", "WARNING", *args])
    out, err = capsys.readouterr()
    return code, out, err


def parser_refuses(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def stored_jobs(db: Path) -> list[storage_adapters.JobRecord]:
    storage = storage_adapters.from_url(f"sqlite:///{db}")
    try:
        storage.setup()
        return list_jobs(storage, None, 100)
    finally:
        storage.close()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"parallel-scheduler {__version__}"


def test_scheduling_an_existing_id_shows_the_stored_due_time(
    store: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job due in about a minute
    args = [*store, "schedule", "t.a", "--id", "j1"]
    code, out, _ = run_cli([*args, "--countdown", "60", "--json"], capsys)
    first = json.loads(out)
    assert code == 0 and first["id"] == "j1" and first["created"] is True
    # When the same id is scheduled again for a day later
    code, out, _ = run_cli([*args, "--countdown", "86400"], capsys)
    # Then nothing changed, and the due time shown is the stored one, not the one asked for
    assert code == 0
    assert out.strip() == f"j1 already exists (unchanged), due {first['due_at']}"
    code, out, _ = run_cli([*args, "--countdown", "86400", "--json"], capsys)
    assert json.loads(out) == {"id": "j1", "created": False, "due_at": first["due_at"]}


def test_show_prints_one_job_in_full(store: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    run_cli([*store, "schedule", "t.b", "--id", "s1", "--args", "[1, 2]", "--queue", "q"], capsys)
    code, out, _ = run_cli([*store, "show", "s1", "--json"], capsys)
    job = json.loads(out)
    assert code == 0
    assert (job["id"], job["task"], job["args"], job["options"]) == (
        "s1",
        "t.b",
        [1, 2],
        {"queue": "q"},
    )
    assert job["state"] == "scheduled" and job["problem"] is None
    code, out, _ = run_cli([*store, "show", "s1"], capsys)
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert code == 0
    assert lines["id"] == "s1" and lines["args"] == "[1, 2]" and lines["due_at"] == job["due_at"]
    # An unknown id: non-zero, and said so
    code, out, err = run_cli([*store, "show", "nope"], capsys)
    assert code == 1 and out == "" and "no such job: nope" in err


def test_reschedule_moves_a_scheduled_job(
    store: list[str], db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli([*store, "schedule", "t.c", "--id", "r1", "--countdown", "60"], capsys)
    eta = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    code, out, _ = run_cli([*store, "reschedule", "r1", "--eta", "2030-01-02T03:04:05Z"], capsys)
    assert code == 0 and out.strip() == f"r1 rescheduled, due {eta.isoformat()}"
    (record,) = stored_jobs(db)
    assert record.due_at == eta.timestamp()
    code, out, _ = run_cli([*store, "reschedule", "r1", "--countdown", "30", "--json"], capsys)
    moved = json.loads(out)
    assert code == 0 and moved["rescheduled"] is True
    due = datetime.fromisoformat(moved["due_at"])
    assert timedelta(0) < due - datetime.now(timezone.utc) <= timedelta(seconds=30)
    # Unknown, or no longer scheduled: non-zero, nothing changed
    code, _, err = run_cli([*store, "reschedule", "nope", "--countdown", "5"], capsys)
    assert code == 1 and "no such job: nope" in err
    run_cli([*store, "cancel", "r1"], capsys)
    code, _, err = run_cli([*store, "reschedule", "r1", "--countdown", "5"], capsys)
    assert code == 1 and "it is cancelled, not scheduled" in err
    # It needs a new due time
    assert "one of the arguments --countdown --eta is required" in parser_refuses(
        [*store, "reschedule", "r1"], capsys
    )


def test_cancel_json_says_which_were_cancelled(
    store: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli([*store, "schedule", "t.d", "--id", "c1", "--countdown", "60"], capsys)
    code, out, _ = run_cli([*store, "cancel", "c1", "c2", "--json"], capsys)
    assert code == 1
    assert json.loads(out) == [{"id": "c1", "cancelled": True}, {"id": "c2", "cancelled": False}]


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["status"], ["recurring", "list"]])
def test_read_only_commands_never_create_a_store(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Given no storage URL at all, in a directory without a store
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARALLEL_SCHEDULER_STORAGE_URL", raising=False)
    code, out, err = run_cli(command, capsys)
    # Then the command says there is no store there, and creates none
    assert code == 2 and out == ""
    assert f"no store at {tmp_path / 'parallel-scheduler.db'}" in err
    assert list(tmp_path.iterdir()) == []


def test_every_command_names_the_store_it_opened(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{db}"
    monkeypatch.setenv("PARALLEL_SCHEDULER_STORAGE_URL", url)  # not on the command line
    for command in (["schedule", "t.e", "--id", "e1"], ["list"], ["show", "e1"], ["status"]):
        code, _, err = run_cli(command, capsys)
        assert code == 0
        assert f"parallel-scheduler: storage {url} (file {db})" in err
    code, out, _ = run_cli(["status", "--json"], capsys)
    assert json.loads(out)["storage"] == f"{url} (file {db})"


def test_piped_tables_keep_ids_whole(store: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    long_id = "L" * 150 + "-" + "x" * 49
    assert len(long_id) == 200
    run_cli([*store, "schedule", "t.f", "--id", long_id, "--countdown", "60"], capsys)
    run_cli([*store, "schedule", "t.f", "--id", "short", "--countdown", "90"], capsys)
    code, out, _ = run_cli([*store, "list"], capsys)
    assert code == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[0][:4] == ["id", "task", "state", "due"]
    assert [row[0] for row in rows[1:]] == [long_id, "short"]
    # an id copied from the listing cancels the job
    assert run_cli([*store, "cancel", rows[1][0]], capsys)[0] == 0


def test_terminal_tables_fold_ids_instead_of_cutting_them(
    store: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    long_id = "T" * 120 + "-" + "y" * 79
    run_cli([*store, "schedule", "t.f", "--id", long_id, "--countdown", "60"], capsys)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # as if printed on a terminal
    code, out, _ = run_cli([*store, "list"], capsys)
    assert code == 0 and "…" not in out
    body = out.split("╇")[-1].splitlines()[1:]  # the rows under the header rule
    id_cells = [line.split("│")[1].strip() for line in body if line.startswith("│")]
    assert "".join(id_cells) == long_id


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["schedule", "t", "--countdown", "1e300"], "outside the valid range"),
        (["schedule", "t", "--countdown", "-1"], "finite and >= 0"),
        (["schedule", "t", "--eta", "9999-12-31T23:00:00-05:00"], "outside the valid range"),
        (["schedule", "t", "--eta", "1969-12-31T00:00:00Z"], "outside the valid range"),
        (["schedule", "t", "--eta", "2030-01-01T00:00:00"], "has no time zone"),
        (["reschedule", "j", "--countdown", "inf"], "finite and >= 0"),
        (["recurring", "add", "r", "t", "--every", "1e300"], "must be from 1 to"),
        (["recurring", "add", "r", "t", "--every", "0.5"], "must be from 1 to"),
        (["recurring", "add", "r", "t", "--every", "60", "--end", "99999-01-01"], "ISO 8601"),
    ],
)
def test_out_of_range_instants_are_one_clear_error(
    args: list[str], message: str, store: list[str], db: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    err = parser_refuses([*store, *args], capsys)
    error_lines = [line for line in err.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and message in error_lines[0]
    assert "Traceback" not in err
    assert not db.exists()  # refused before anything was opened


def test_run_once_exits_non_zero_when_a_job_could_not_be_sent(
    store: list[str], db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a due job, and a broker that resets every connection, each one counted
    run_cli([*store, "schedule", "t.g", "--id", "g1"], capsys)
    with CountingListener("reset") as broker:
        code, out, err = run_cli(
            [*store, "run", "--broker-url", f"redis://127.0.0.1:{broker.port}/0", "--once"], capsys
        )
        attempts = broker.connections
    # Then the pass fails fast, exits 1, says how many jobs stayed due
    assert code == 1
    assert json.loads(out)["delayed"]["failed"] == 1
    assert "1 job(s) could not be sent; 1 job(s) stayed due" in err
    # the send retries are bounded: the dispatcher's 3 attempts (the bare one and 2 retries),
    # one connection each, no connect loop of the broker client's own
    assert attempts == 3, err
    (record,) = stored_jobs(db)
    assert record.state is JobState.SCHEDULED and record.last_error


def test_the_celery_command_once_exits_non_zero_when_a_job_could_not_be_sent(
    store: list[str], db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a due job, and a Celery app whose broker refuses connections
    run_cli([*store, "schedule", "t.g", "--id", "g1"], capsys)
    (tmp_path / "refusing_app.py").write_text(
        "from celery import Celery\n"
        "import parallel_scheduler.celery\n"
        "app = Celery('refusing', broker='redis://127.0.0.1:1/0')\n"
        f"app.conf.parallel_scheduler_storage_url = {store[1]!r}\n"
        "parallel_scheduler.celery.install(app)\n"
    )
    celery = Path(sys.executable).with_name("celery")
    # When `celery -A app parallel-scheduler --once` runs one pass
    done = subprocess.run(
        [str(celery), "-A", "refusing_app", "parallel-scheduler", "--once"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # Then it exits 1 and says how many jobs stayed due, as `parallel-scheduler run --once` does
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["delayed"]["failed"] == 1
    assert "1 job(s) could not be sent; 1 job(s) stayed due" in done.stderr
    (record,) = stored_jobs(db)
    assert record.state is JobState.SCHEDULED


def test_an_unexpected_error_is_one_line_with_the_url_masked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a command that fails with an error that is not one of ours (a bug)
    url = "postgresql://app:hunter2@127.0.0.1:1/none"

    def broken(ns: object) -> int:
        raise RuntimeError(f"cannot talk to {url}")

    monkeypatch.setattr(cli_jobs, "cmd_list", broken)
    code, out, err = run_cli(["--storage-url", url, "list"], capsys)
    # Then: one line, exit 2, no traceback, no password
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "parallel-scheduler: error: unexpected RuntimeError: cannot talk to "
        "postgresql://app:***@127.0.0.1:1/none (--log-level DEBUG shows where)"
    ]
