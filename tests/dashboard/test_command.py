"""``parallel-scheduler dashboard``: serves the app with waitress on 127.0.0.1 by default,
prints its URL, takes credentials from options or the environment, refuses bad ones by name."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from parallel_scheduler import Client
from parallel_scheduler.cli import main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Client(storage_url=url) as client:
        client.setup()
        client.schedule("t.a", countdown=600, job_id="cli-1")
    return url


def _serve(url: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    command = [sys.executable, "-m", "parallel_scheduler", "--storage-url", url, "dashboard"]
    process = subprocess.Popen(
        [*command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server listens (or exits)
        assert line.startswith("dashboard: http://127.0.0.1:"), (line, process.stderr)
        yield line.split()[1]
    finally:
        process.terminate()
        process.wait(timeout=20)


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serves_on_loopback_with_a_token_from_the_environment(store_url: str) -> None:
    served = _serve(store_url, env={"PARALLEL_SCHEDULER_DASHBOARD_TOKEN": "env-token-123"})
    base = next(served)
    try:
        assert _status(base) == 401
        assert _status(base + "jobs", {"Authorization": "Bearer env-token-123"}) == 200
        detail = base + "jobs/detail?id=cli-1"
        assert _status(detail, {"Authorization": "Bearer env-token-123"}) == 200
    finally:
        served.close()


def test_basic_auth_and_read_only(store_url: str) -> None:
    served = _serve(store_url, "--basic-auth", "ops:pa:ss", "--read-only")
    base = next(served)
    try:
        good = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
        assert _status(base) == 401
        assert _status(base, {"Authorization": good}) == 200
    finally:
        served.close()


def test_bad_credentials_are_refused_by_name(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--storage-url", store_url, "dashboard", "--basic-auth", "nocolon"]) == 2
    assert "USER:PASSWORD" in capsys.readouterr().err
    assert main(["--storage-url", store_url, "dashboard", "--token", "short"]) == 2
    assert "at least 8 characters" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "raw", "named"),
    [
        ("--port", "x", "port 'x' is not a number"),
        ("--port", "65536", "port must be between 0 and 65535, not 65536"),
        ("--threads", "0", "threads must be between 1 and 256, not 0"),
        ("--threads", "y", "threads 'y' is not a number"),
    ],
)
def test_a_bad_port_or_thread_count_is_refused_by_name(
    store_url: str, capsys: pytest.CaptureFixture[str], option: str, raw: str, named: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--storage-url", store_url, "dashboard", option, raw])
    assert exited.value.code == 2
    assert named in capsys.readouterr().err
