"""What an operator meets first, from real processes: the one start-up line of ``parallel-scheduler
run`` and ``celery -A proj parallel-scheduler`` (instance id, masked storage, settings), the
``--log-format json`` lines (every stderr line one JSON object), and plain lines that read as
prose. The worker bootstep's line: tests/celery_integration/test_celery_startup_line.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import __version__
from parallel_scheduler.cli import main
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]


def with_password(url: str) -> tuple[str, str]:
    """``url`` with a password (trust authentication ignores it), and that password."""
    parsed = sa.engine.make_url(url)
    if not parsed.password:
        parsed = parsed.set(password="hunter2-secret")
    return parsed.render_as_string(hide_password=False), str(parsed.password)


class Store:
    """A PostgreSQL store of its own (a password in its URL), with one due job, one due
    recurring job, and a queue of its own on Redis; dropped afterwards."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        require_server("postgresql")
        require_server("redis")
        self.url, self.password = with_password(POSTGRESQL_URL)
        self.prefix = f"op{uuid.uuid4().hex[:8]}"
        self.queue = f"ps-operator-{self.prefix}"
        self.options = ["--storage-url", self.url, "--prefix", self.prefix]
        for command in (
            ["schedule", "ops.task", "--queue", self.queue],
            ["recurring", "add", "r1", "ops.tick", "--every", "1", "--queue", self.queue],
        ):  # fmt: skip
            assert main(["--log-level", "WARNING", *self.options, *command]) == 0
        capsys.readouterr()
        # the recurring job's first run falls due within a second, on the storage clock
        storage = storage_adapters.from_url(self.url, prefix=self.prefix)
        try:
            record = storage.get_recurring("r1")
            assert record is not None and record.next_run_at is not None
            due = record.next_run_at
            wait_until(lambda: storage.now() >= due, timeout=10)
        finally:
            storage.close()

    def close(self) -> None:
        redis.Redis.from_url(REDIS_URL).delete(self.queue)
        storage = storage_adapters.from_url(self.url, prefix=self.prefix)
        storage.drop()
        storage.close()


@pytest.fixture
def store(capsys: pytest.CaptureFixture[str]) -> Iterator[Store]:
    made = Store(capsys)
    try:
        yield made
    finally:
        made.close()


def run_once(
    store: Store, *before: str, after: tuple[str, ...] = (), broker: str = REDIS_URL
) -> subprocess.CompletedProcess[str]:
    """One ``run --once`` pass; on the working broker it must release the due jobs."""
    done = subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", *store.options, *before,
         "run", "--broker-url", broker, "--once", *after],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if broker != REDIS_URL:
        return done
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["delayed"]["released"] >= 1
    return done


START = re.compile(
    rf"parallel-scheduler {re.escape(__version__)} starting: instance (\S+), "
    r"storage (\S+), settings (.+)$"
)


@pytest.mark.parametrize(
    "placement", ["before the command", "after run"], ids=["global", "run-option"]
)
def test_json_log_lines_are_one_object_each_with_the_event_fields(
    store: Store, placement: str
) -> None:
    option = ("--log-format", "json")
    done = run_once(store, *(option if placement == "before the command" else ()),
                    after=option if placement == "after run" else ())  # fmt: skip
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # each line is JSON
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    starts = [line for line in lines if START.match(line["message"])]
    assert len(starts) == 1, done.stderr
    (start,) = starts
    assert start["level"] == "INFO" and start["version"] == __version__
    assert start["storage"] == storage_adapters.mask_url(store.url)
    assert start["settings"]["prefix"] == store.prefix and "storage_url" not in start["settings"]
    assert start["settings"]["log_format"] == "json"
    released = [line for line in lines if line["message"].startswith("pass released")]
    # the scheduled job, and the recurring job's firing(s) unless the firing step sent them
    # itself (PostgreSQL sends due firings in the transaction that fires them)
    assert released and released[0]["released"] == released[0]["fetched"] >= 1
    assert "duration" not in released[0]  # not known yet when a pass logs
    fired = [line for line in lines if line["message"].startswith("recurring pass")]
    assert fired and fired[0]["fired"] == 1 and fired[0]["created"] >= 1
    assert store.password not in done.stderr


def test_plain_lines_read_as_prose_and_start_with_one_line(store: Store) -> None:
    done = run_once(store)
    assert store.password not in done.stderr
    starts = [m for line in done.stderr.splitlines() if (m := START.search(line))]
    assert len(starts) == 1, done.stderr
    instance, storage, settings = starts[0].groups()
    assert storage == storage_adapters.mask_url(store.url) and "***" in storage
    assert f"prefix={store.prefix}" in settings and "log_format=plain" in settings
    assert re.search(r"pass released (\d+) of \1 due job\(s\) \(1 batch\(es\),", done.stderr)
    assert re.search(
        r"recurring pass: 1 recurring job\(s\) fired, \d+ firing\(s\) created, "
        r"0 firing\(s\) already existed, 0 stale recurring job\(s\), "
        r"\d+ missed occurrence\(s\), 0 recurring job\(s\) failed",
        done.stderr,
    ), done.stderr
    assert "{" not in done.stderr and "'" not in done.stderr  # no dict reprs
    assert instance  # the scheduler's lock owner, as `status` lists it


def _celery_app(tmp_path: Path, store: Store, **conf: Any) -> str:
    module = f"ps_operator_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(
        "from celery import Celery\n"
        "import parallel_scheduler.celery\n"
        f"app = Celery('operator', broker={REDIS_URL!r})\n"
        f"app.conf.parallel_scheduler_storage_url = {store.url!r}\n"
        f"app.conf.parallel_scheduler_prefix = {store.prefix!r}\n"
        + "".join(f"app.conf.parallel_scheduler_{k} = {v!r}\n" for k, v in conf.items())
        + "parallel_scheduler.celery.install(app)\n"
    )
    return module


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_the_celery_command_starts_with_one_line(
    store: Store, tmp_path: Path, log_format: str
) -> None:
    module = _celery_app(tmp_path, store, log_format=log_format)
    celery = Path(sys.executable).with_name("celery")
    done = subprocess.run(
        [str(celery), "-A", module, "parallel-scheduler", "--once"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert store.password not in done.stderr
    if log_format == "json":
        messages = [json.loads(line)["message"] for line in done.stderr.splitlines()]
    else:
        messages = done.stderr.splitlines()
    starts = [m for line in messages if (m := START.search(line))]
    assert len(starts) == 1, done.stderr
    assert starts[0].group(2) == storage_adapters.mask_url(store.url)
    assert f"log_format={log_format}" in starts[0].group(3)


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_an_error_is_one_line_in_the_log_format(log_format: str) -> None:
    # Given a store URL the command cannot use, with a password in it
    done = subprocess.run(
        [sys.executable, "-m", "parallel_scheduler", "--log-level", "CRITICAL",
         "--log-format", log_format, "--storage-url", "mysql://u:hunter2@127.0.0.1/db",
         "run", "--broker-url", REDIS_URL, "--once"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # Then it exits 2 with one error line, masked, shown at any log level, JSON when asked
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    message = json.loads(line)["message"] if log_format == "json" else line
    assert message.startswith("parallel-scheduler: error: unknown storage URL scheme 'mysql'")
    assert "hunter2" not in line and "u:***@" in message


def test_a_failed_pass_says_so_in_json_too(store: Store) -> None:
    # Given due jobs, and a broker that refuses connections
    done = run_once(store, "--log-format", "json", broker="redis://127.0.0.1:1/0")
    # Then the pass exits 1, and its error line is one JSON object among the others
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    errors = [line for line in lines if "stayed due" in line["message"]]
    assert len(errors) == 1 and errors[0]["level"] == "ERROR", done.stderr
    assert errors[0]["message"].startswith("parallel-scheduler: error: ")


def test_every_stderr_line_of_a_command_is_json_when_asked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    for command in (["setup"], ["status"], ["schedule", "ops.task"], ["list"]):
        done = subprocess.run(
            [sys.executable, "-m", "parallel_scheduler", "--log-format", "json",
             "--storage-url", url, *command],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stderr.splitlines()]
        # the command names the store it opened, as a JSON record
        assert [line["message"] for line in lines] == [
            f"parallel-scheduler: storage {url} (file {tmp_path / 'store.db'})"
        ]
