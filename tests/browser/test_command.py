"""The real ``parallel-scheduler dashboard`` command, served by waitress in its own process, used
from the browser with a token (as a browser sends it: the basic-auth password)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from parallel_scheduler import Client
from tests.browser.data import DataSet
from tests.browser.steps import follow

TOKEN = "cmd-token-0123456789"
STARTUP_TIMEOUT = 20.0  # seconds for the command to import, open storage and listen


@pytest.fixture
def command(store_url: str, client: Client, data: DataSet) -> Iterator[str]:
    """``parallel-scheduler dashboard --port 0`` over the data set's store; its URL."""
    env = {
        **os.environ,
        "PARALLEL_SCHEDULER_STORAGE_URL": store_url,
        "PARALLEL_SCHEDULER_PREFIX": client.settings.prefix,
        "PARALLEL_SCHEDULER_DASHBOARD_TOKEN": TOKEN,  # not on the command line: ps shows that
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "parallel_scheduler", "dashboard", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    try:
        said: list[str] = []
        while True:
            try:
                said.append(lines.get(timeout=STARTUP_TIMEOUT))
            except queue.Empty:
                pytest.fail(f"the dashboard command printed no URL in {STARTUP_TIMEOUT} s: {said}")
            found = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/", said[-1])
            if found:
                break
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgresql)], indirect=True
)
def test_the_dashboard_command_serves_the_pages_and_acts(
    browser: Any, command: str, data: DataSet, client: Client
) -> None:
    anonymous = browser.new_context()
    try:
        assert anonymous.request.get(command + "/").status == 401
    finally:
        anonymous.close()
    context = browser.new_context(
        viewport={"width": 1280, "height": 800},
        http_credentials={"username": "ops", "password": TOKEN},
    )
    try:
        page = context.new_page()
        response = page.goto(command + "/")
        assert response is not None and response.status == 200
        assert response.headers["server"] == "waitress"
        assert page.inner_text("#count-scheduled td.num") == str(client.counts()["scheduled"])
        target = data.scheduled[1]
        follow(page, "#nav-jobs")
        follow(page, f"#jobs-table tr[data-job-id='{target}'] a.job-link")
        page.check("#cancel-confirm")
        follow(page, "#cancel-submit")
        assert page.inner_text("#job-state") == "cancelled"
        cancelled = client.get(target)
        assert cancelled is not None and cancelled.state.value == "cancelled"
    finally:
        context.close()
