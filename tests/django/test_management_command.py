"""``manage.py parallel_scheduler <command>``: the command line with the Django project's settings,
through ``call_command`` and as a user runs it, a real ``manage.py`` of a project written in a
temporary directory; ``run`` releasing a due job into a real Redis broker and stopping on
SIGTERM."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import DelayedJobScheduler, JobState
from parallel_scheduler.contrib.django import commands, conf
from parallel_scheduler.settings import Settings
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server, unique_prefix

WAIT = 60  # a deadline for conditions, never a sleep

MANAGE_PY = """\
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj_settings")
from django.core.management import execute_from_command_line

execute_from_command_line(sys.argv)
"""


def clean_env() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PARALLEL_SCHEDULER_") and name != "DJANGO_SETTINGS_MODULE"
    }


@pytest.fixture(autouse=True)
def no_scheduler_variables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("PARALLEL_SCHEDULER_") and not name.startswith(
            "PARALLEL_SCHEDULER_TEST_"
        ):
            monkeypatch.delenv(name)
    yield
    conf.reset()


class Project:
    """A Django project in ``folder``: its settings module and ``manage.py``."""

    def __init__(self, folder: Path, scheduler: dict[str, Any]) -> None:
        self.folder = folder
        (folder / "proj_settings.py").write_text(
            "SECRET_KEY = 'tests-only'\n"
            "USE_TZ = True\n"
            "DATABASES = {}\n"
            "INSTALLED_APPS = ['parallel_scheduler.contrib.django']\n"
            f"PARALLEL_SCHEDULER = {scheduler!r}\n"
        )
        (folder / "manage.py").write_text(MANAGE_PY)

    def args(self, *args: str) -> list[str]:
        return [sys.executable, "manage.py", "parallel_scheduler", *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.args(*args),
            cwd=self.folder,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=WAIT,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path, {"storage_url": f"sqlite:///{tmp_path / 'jobs.db'}", "prefix": "dj"})


# -- as a user runs it ------------------------------------------------------------------------


def test_setup_schedule_list_status_check(project: Project) -> None:
    # Given the project's settings only (no option, no environment variable)
    done = project.run("setup")
    assert done.returncode == 0, done.stderr
    assert "schema ready" in done.stdout
    assert f"storage sqlite:///{project.folder / 'jobs.db'}" in done.stderr
    later = project.run("schedule", "tasks.add", "--args", "[1, 2]", "--countdown", "3600")
    assert later.returncode == 0, later.stderr
    # Nothing due, no scheduler: healthy, exit 0
    checked = project.run("status", "--check")
    assert (checked.returncode, checked.stdout) == (0, "healthy\n")
    # When a job is due and no scheduler runs, Then status --check exits 1, saying why
    assert project.run("schedule", "tasks.now", "--id", "now-job").returncode == 0
    checked = project.run("status", "--check")
    assert checked.returncode == 1
    assert checked.stdout.startswith("unhealthy: no live scheduler while jobs are due")
    listed = project.run("list", "--json")
    assert listed.returncode == 0
    assert sorted(job["task"] for job in json.loads(listed.stdout)) == ["tasks.add", "tasks.now"]
    # The jobs are in the store the settings name, under their prefix
    store = storage_adapters.from_url(f"sqlite:///{project.folder / 'jobs.db'}", prefix="dj")
    try:
        assert store.get_job("now-job") is not None
    finally:
        store.close()


def test_a_bad_argument_exits_2_with_the_command_lines_error(project: Project) -> None:
    refused = project.run("list", "--limit", "zero")
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == (
        "parallel-scheduler list: error: argument --limit: 'zero' is not an integer"
    )
    unknown = project.run("launch")
    assert unknown.returncode == 2
    assert "invalid choice: 'launch'" in unknown.stderr.splitlines()[-1]


def test_a_bad_django_setting_is_one_line_and_masked(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/db"
    bad = Project(tmp_path, {"storage_url": url, "batch_size": -3})
    refused = bad.run("status")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "parallel-scheduler: error: batch_size must be an integer from 1 to 100000, not -3"
    ]
    unreachable = Project(tmp_path, {"storage_url": url, "connect_timeout": 1}).run("status")
    assert unreachable.returncode == 2
    assert "hunter2" not in unreachable.stdout + unreachable.stderr
    assert "app:***@127.0.0.1:1" in unreachable.stderr


def test_the_storage_url_is_masked_on_a_reachable_store(tmp_path: Path) -> None:
    require_server("postgresql")
    # The test server trusts loopback, so the password is given but never asked for
    scheme, rest = POSTGRESQL_URL.split("://", 1)
    user, _, location = rest.partition("@")
    url = f"{scheme}://{user.split(':')[0]}:hunter2@{location}"
    prefix = unique_prefix()
    project = Project(tmp_path, {"storage_url": url, "prefix": prefix})
    try:
        done = project.run("setup")
        assert done.returncode == 0, done.stderr
        shown = project.run("status")
        assert shown.returncode == 0, shown.stderr
        assert "hunter2" not in done.stdout + done.stderr + shown.stdout + shown.stderr
        assert ":***@" in done.stderr
    finally:
        store = storage_adapters.from_url(POSTGRESQL_URL, prefix=prefix)
        store.drop()
        store.close()


def test_help_lists_the_command_lines_commands(project: Project) -> None:
    for args in (["--help"], []):
        shown = project.run(*args)
        assert shown.returncode == 0
        assert shown.stdout.startswith("usage: manage.py parallel_scheduler")
        for command in ("run", "status", "list", "cancel", "purge", "recurring", "setup"):
            assert f"    {command} " in shown.stdout or f"    {command}\n" in shown.stdout
        assert "import-django-celery-beat" in shown.stdout
    via_help = subprocess.run(
        [sys.executable, "manage.py", "help", "parallel_scheduler"],
        cwd=project.folder,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert via_help.returncode == 0 and "import-django-celery-beat" in via_help.stdout
    assert project.run("status", "--help").stdout.startswith("usage: parallel-scheduler status")


def test_run_releases_into_the_broker_and_stops_on_sigterm(project: Project) -> None:
    require_server("redis")
    import redis

    queue = f"ps-django-{uuid.uuid4().hex[:8]}"
    assert project.run("schedule", "tasks.x", "--id", "dj-job", "--queue", queue).returncode == 0
    broker = redis.Redis.from_url(REDIS_URL)
    process = subprocess.Popen(
        project.args("run", "--broker-url", REDIS_URL, "--poll-interval", "0.1"),
        cwd=project.folder,
        env=clean_env(),
        stderr=subprocess.PIPE,
    )
    storage = storage_adapters.from_url(f"sqlite:///{project.folder / 'jobs.db'}", prefix="dj")
    try:
        # The job the project's settings name reaches the broker queue, its id as the task id
        raw = wait_until(lambda: broker.lindex(queue, 0), timeout=WAIT)
        assert json.loads(raw)["headers"]["id"] == "dj-job"
        wait_until(
            lambda: getattr(storage.get_job("dj-job"), "state", None) is JobState.ENQUEUED, WAIT
        )
        # SIGTERM: finishes, releases its lock, exits 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT) == 0
        assert storage.lock_holder(DelayedJobScheduler.LOCK_NAME) is None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT)
        assert process.stderr is not None
        process.stderr.close()
        broker.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        broker.close()
        storage.close()


# -- through call_command ---------------------------------------------------------------------


def test_call_command_runs_the_command_line_and_keeps_its_status(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'called.db'}"
    with override_settings(PARALLEL_SCHEDULER={"storage_url": url, "prefix": "djc"}):
        out, err = io.StringIO(), io.StringIO()
        call_command("parallel_scheduler", "setup", stdout=out, stderr=err)
        call_command("parallel_scheduler", "schedule", "t.due", "--id", "due", stdout=out)
        listed = io.StringIO()
        call_command("parallel_scheduler", "list", "--json", stdout=listed, stderr=err)
        assert [job["id"] for job in json.loads(listed.getvalue())] == ["due"]
        # status --check with a due job and no scheduler: exit 1 as a CommandError's returncode
        checked = io.StringIO()
        with pytest.raises(CommandError) as raised:
            call_command("parallel_scheduler", "status", "--check", stdout=checked, stderr=err)
        assert raised.value.returncode == 1
        assert checked.getvalue().startswith("unhealthy: no live scheduler")
        # a bad argument: exit 2
        with pytest.raises(CommandError) as raised:
            call_command("parallel_scheduler", "list", "--limit", "0", stdout=out, stderr=err)
        assert raised.value.returncode == 2
        assert "argument --limit" in err.getvalue()
    # The settings were lent to the command line for its duration only
    assert not [name for name in os.environ if name.startswith("PARALLEL_SCHEDULER_STORAGE")]


def test_an_option_given_wins_over_the_projects_settings(tmp_path: Path) -> None:
    mine, other = f"sqlite:///{tmp_path / 'mine.db'}", f"sqlite:///{tmp_path / 'other.db'}"
    with override_settings(PARALLEL_SCHEDULER={"storage_url": mine}):
        call_command("parallel_scheduler", "--storage-url", other, "setup", stdout=io.StringIO())
    assert (tmp_path / "other.db").exists() and not (tmp_path / "mine.db").exists()


def test_the_settings_reach_the_command_line_exactly(tmp_path: Path) -> None:
    given = {
        "storage_url": f"sqlite:///{tmp_path / 'x.db'}",
        "poll_interval": 0.1,
        "eta_threshold": 12.5,
        "fast_publish": False,
        "release_mode": "per_job",
        "shards": 3,
        "retention": 0,
    }
    with override_settings(PARALLEL_SCHEDULER=given, CELERY_PARALLEL_SCHEDULER_BATCH_SIZE=17):
        sources = conf.django_sources()
        settings = conf.load_settings()
        environ = commands.settings_environment(sources, settings)
    assert Settings.load(environ=environ) == settings
    assert set(environ) == {f"PARALLEL_SCHEDULER_{name.upper()}" for name in given} | {
        "PARALLEL_SCHEDULER_BATCH_SIZE"
    }


def test_django_options_manage_py_applied_are_not_passed_on() -> None:
    argv = ["--settings", "a.b", "list", "--pythonpath=/x", "--json", "--settings=c"]
    assert commands.without_django_options(argv) == ["list", "--json"]


def test_the_django_celery_beat_import_is_routed_to_its_command() -> None:
    err = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("parallel_scheduler", "import-django-celery-beat", "--bogus", stderr=err)
    assert raised.value.returncode == 2
    assert "import-django-celery-beat: error: unrecognized arguments: --bogus" in err.getvalue()
