"""The browser tier: the dashboard served over real HTTP, driven by a real headless Chromium.

The browser is the distribution's Chromium (Debian's ``chromium`` package), driven by Playwright
for Python through ``executable_path``: nothing is downloaded at run time (``playwright install``
is never run). When ``/usr/bin/chromium`` is missing, the session installs it with apt-get when
running as root and says so; otherwise every browser test fails naming the command to run. No
browser test is ever skipped, so a missing browser cannot pass unnoticed in CI.

The dashboard runs in a thread of the test process (werkzeug's server on a free 127.0.0.1
port) for speed; ``test_command.py`` runs the real ``parallel-scheduler dashboard`` command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import storage_adapters
from parallel_scheduler import Client
from tests.browser.data import DataSet, fill
from tests.conftest import storage_url, unique_prefix

CHROMIUM = os.environ.get("PARALLEL_SCHEDULER_TEST_CHROMIUM", "/usr/bin/chromium")
INSTALL_COMMAND = ["apt-get", "install", "-y", "chromium"]
VIEWPORT = {"width": 1280, "height": 800}
#: Playwright waits this long for an element before failing (its default is 30 s).
STEP_TIMEOUT_MS = 5_000
BROWSER_TIMEOUT = 60  # seconds per browser test, installing nothing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.timeout(BROWSER_TIMEOUT))


def _ensure_chromium() -> str:
    """The browser's path, installing Debian's package first when it is missing and we may."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    command = " ".join(INSTALL_COMMAND)
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}; install it with "
            f"`sudo apt-get update && sudo {command}` (Debian/Ubuntu), or point "
            "PARALLEL_SCHEDULER_TEST_CHROMIUM at a Chromium binary"
        )
    for step in (["apt-get", "update"], INSTALL_COMMAND):
        print(f"browser tests: Chromium missing at {CHROMIUM}; running {' '.join(step)}")
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(
                f"`{' '.join(step)}` failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
    if not Path(CHROMIUM).exists():
        pytest.fail(f"`{command}` succeeded but {CHROMIUM} is still missing")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (launching costs about a second)."""
    executable = _ensure_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright for Python: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses to start its sandbox as root (CI containers).
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


class Dialogs:
    """Every JavaScript dialog a page opened. An ``alert`` always fails the test (an escaped
    ``<script>`` argument must never run); ``confirm`` dialogs are accepted only while
    ``accept_confirms`` is set, and dismissed otherwise."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.accept_confirms = False

    def handle(self, dialog: Any) -> None:
        self.seen.append((dialog.type, dialog.message))
        if dialog.type == "confirm" and self.accept_confirms:
            dialog.accept()
        else:
            dialog.dismiss()

    def alerts(self) -> list[str]:
        return [message for kind, message in self.seen if kind != "confirm"]


@pytest.fixture
def dialogs() -> Dialogs:
    return Dialogs()


@pytest.fixture
def page(browser: Any, dialogs: Dialogs, tmp_path: Path) -> Iterator[Any]:
    """A fresh browser context (no cookies) at 1280x800; fails the test if any alert fired."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(STEP_TIMEOUT_MS)
    opened = context.new_page()
    opened.on("dialog", dialogs.handle)
    yield opened
    context.close()
    assert not dialogs.alerts(), f"a page opened JavaScript dialogs: {dialogs.alerts()}"


@pytest.fixture
def shot(page: Any, tmp_path: Path) -> Callable[[str], Path]:
    """Save a full-page screenshot of the current page into the test's tmp dir."""

    def take(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


class Served:
    """A WSGI app served over HTTP in a daemon thread until ``stop``."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """SQLite in ``tmp_path``, or the server a test names by indirect parametrization
    (``postgresql``, ``redis``: skipped when unreachable, failed under CI=true)."""
    return storage_url(getattr(request, "param", "sqlite"), tmp_path)


@pytest.fixture
def make_client() -> Iterator[Callable[[str], Client]]:
    """Clients of fresh, set-up stores, each under its own prefix; dropped at the end."""
    made: list[Client] = []

    def make(url: str) -> Client:
        prefix = unique_prefix()
        store = storage_adapters.from_url(url, prefix=prefix)
        client = Client(storage=store, storage_url=url, prefix=prefix)  # the settings say it too
        client.storage.setup()
        made.append(client)
        return client

    yield make
    for client in made:
        client.storage.drop()
        client.storage.close()


@pytest.fixture
def client(make_client: Callable[[str], Client], store_url: str) -> Client:
    return make_client(store_url)


@pytest.fixture
def data(client: Client) -> DataSet:
    return fill(client)


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """``serve(client, **options)``: the dashboard app over ``client``'s store, served; its URL."""
    from parallel_scheduler.dashboard import create_app

    servers: list[Served] = []

    def start(client: Client, **options: Any) -> str:
        served = Served(create_app(client, **options))
        servers.append(served)
        return served.url

    yield start
    for served in servers:
        served.stop()


@pytest.fixture
def dashboard(serve: Callable[..., str], client: Client, data: DataSet) -> str:
    """The dashboard over the SQLite data set, with actions enabled and no auth."""
    return serve(client)
