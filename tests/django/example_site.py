"""The example Django project (``examples/django_project``) copied into a test's directory and
driven as its users would: ``manage.py`` commands, ``runserver`` and a Celery worker as child
processes, and a headless Chromium.

Nothing here runs in the test process's Django (``tests/django/settings.py``): every Django call
is a ``manage.py`` subprocess with the example's own settings and the environment given here.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from devtools.processes import ChildProcess, clean_environment
from devtools.waiting import wait_until
from tests.conftest import REDIS_URL

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_project"
PASSWORD = "example-password-1"
#: The Redis database of the example's broker: the other tests use 0 to 3, the docs 8 to 15.
BROKER_DB = 5
#: Seconds a ``manage.py`` command, the site's start and the worker's start may take.
COMMAND_TIMEOUT = 120
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def broker_url() -> str:
    return REDIS_URL.rsplit("/", 1)[0] + f"/{BROKER_DB}"


class Site:
    """One copy of the example project, its environment and the processes started for it."""

    def __init__(self, workdir: Path, **env: str) -> None:
        self.workdir = workdir
        self.dir = workdir / "django_project"
        shutil.copytree(
            EXAMPLE, self.dir, ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3", "*.log")
        )
        self.queue = f"ps-django-example-{uuid.uuid4().hex[:10]}"
        self.outbox = workdir / "outbox.log"
        self.env = clean_environment(
            CELERY_BROKER_URL=broker_url(),
            CELERY_TASK_DEFAULT_QUEUE=self.queue,
            REMINDERS_OUTBOX=str(self.outbox),
            # the worker's scheduler looks for due jobs five times a second, not once
            PARALLEL_SCHEDULER_POLL_INTERVAL="0.2",
            **env,
        )
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.processes: list[ChildProcess] = []
        self.url = ""

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``python manage.py ARGS`` in the project; fails the test (with its output) on a
        non-zero exit when ``check``."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=self.dir, env=self.env,
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            pytest.fail(
                f"manage.py {' '.join(args)} exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done

    def shell(self, code: str) -> Any:
        """Run ``code`` with ``manage.py shell -c``; the JSON its last line printed."""
        lines = self.manage("shell", "-c", code).stdout.strip().splitlines()
        return json.loads(lines[-1])

    def json_of(self, *args: str) -> Any:
        """``manage.py parallel_scheduler ARGS --json``, parsed."""
        return json.loads(self.manage("parallel_scheduler", *args, "--json").stdout)

    def _start(self, name: str, command: list[str]) -> ChildProcess:
        child = ChildProcess(self.workdir, name, command, self.env, cwd=self.dir)
        self.processes.append(child)
        return child

    def start_server(self) -> str:
        """``manage.py runserver`` on a free port, once it answers; its base URL."""
        port = free_port()
        server = self._start(
            "runserver",
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        )
        self.url = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            if not server.alive():
                pytest.fail(f"runserver exited:\n{server.log()}")
            try:
                with urllib.request.urlopen(self.url + "/admin/login/", timeout=5) as response:
                    return int(response.status) == 200
            except (urllib.error.URLError, OSError):
                return False

        wait_until(answers, timeout=COMMAND_TIMEOUT, interval=0.1)
        return self.url

    def start_worker(self) -> ChildProcess:
        """A Celery worker of the project that also runs the scheduler, on the site's queue."""
        hostname = f"{self.queue}@%h"
        worker = self._start(
            "worker",
            [sys.executable, "-m", "celery", "-A", "mysite", "worker", "--parallel-scheduler",
             "--pool", "solo", "-Q", self.queue, "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--loglevel", "INFO", f"--hostname={hostname}"],
        )  # fmt: skip

        def ready() -> bool:
            if not worker.alive():
                pytest.fail(f"the worker exited:\n{worker.log()}")
            return any(
                self.queue in line and line.rstrip().endswith("ready.")
                for line in worker.log().splitlines()
            )

        wait_until(ready, timeout=COMMAND_TIMEOUT, interval=0.1)
        return worker

    def stop(self) -> None:
        """End every process started here (by pid), then the broker queue's keys."""
        while self.processes:
            self.processes.pop().end(grace=30)
        import redis

        keys = (
            self.queue,
            f"_kombu.binding.{self.queue}",
            f"_kombu.binding_permanent.{self.queue}",
        )
        redis.Redis.from_url(broker_url()).delete(*keys)

    def logs(self) -> str:
        return "\n".join(f"--- {child.name} log:\n{child.log()}" for child in self.processes)


def in_browser(steps: Callable[[Any], T], config: pytest.Config) -> T:
    """``steps(browser)`` with a headless Chromium (Debian's, as the browser tier uses), in a
    thread of its own: Playwright's sync API refuses a second instance in a thread that has one,
    and the browser tier's session browser may be open in this process's main thread."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import _ensure_chromium

    executable = _ensure_chromium(config)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=executable, headless=True, args=["--no-sandbox"]
                )
                try:
                    outcome["value"] = steps(browser)
                finally:
                    browser.close()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="example-browser")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
