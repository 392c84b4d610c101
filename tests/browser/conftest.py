"""The browser tier: the dashboard served over real HTTP, driven by a real headless Chromium.

The browser is the distribution's Chromium (Debian's ``chromium`` package), driven by Playwright
for Python through ``executable_path``: nothing is downloaded at run time (``playwright install``
is never run). It is checked once at collection, before any test: when ``/usr/bin/chromium`` is
missing it is installed with apt-get when running as root (saying so, with apt-get's progress);
otherwise every browser test fails naming the command to run. No browser test is ever skipped,
so a missing browser cannot pass unnoticed in CI.

The dashboard runs in a thread of the test process (werkzeug's server on a free 127.0.0.1
port) for speed; ``test_command.py`` runs the real ``parallel-scheduler dashboard`` command.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from playwright.sync_api import sync_playwright
except ImportError as missing:  # a collection error, never a skip
    raise ImportError(
        "the browser tests need Playwright for Python (its driver only; the browser is "
        "Debian's chromium): pip install -e '.[test]'"
    ) from missing

import storage_adapters
from parallel_scheduler import Client
from tests.browser.data import DataSet, fill
from tests.conftest import storage_url, unique_prefix

DEBIAN_CHROMIUM = "/usr/bin/chromium"
CHROMIUM = os.environ.get("PARALLEL_SCHEDULER_TEST_CHROMIUM", DEBIAN_CHROMIUM)
INSTALL_STEPS = (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"])
INSTALL_LOCK = Path("/tmp/parallel-scheduler-chromium-install.lock")
VIEWPORT = {"width": 1280, "height": 800}
#: Playwright waits this long for an element before failing (its default is 30 s).
STEP_TIMEOUT_MS = 5_000
BROWSER_TIMEOUT = 60  # seconds per browser test, installing nothing


#: What ``_ensure_chromium`` found: the browser's path, or why there is none.
_chromium: dict[str, str] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each browser test gets its timeout; Chromium is checked (and installed) here, once
    before any test runs, so an apt-get install is not cut short by a test's timeout."""
    here = Path(__file__).parent
    mine = [item for item in items if item.path.is_relative_to(here)]
    for item in mine:
        if item.get_closest_marker("timeout") is None:  # a module may ask for longer
            item.add_marker(pytest.mark.timeout(BROWSER_TIMEOUT))
    if mine and not config.option.collectonly and not _chromium:
        try:
            _chromium["path"] = _ensure_chromium(config)
        except pytest.fail.Exception as exc:
            _chromium["problem"] = str(exc)


def _ensure_chromium(config: pytest.Config) -> str:
    """The browser's path, installing Debian's package first when it is missing and we may
    (root, apt-get present); otherwise a failure naming exactly what to run."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if CHROMIUM != DEBIAN_CHROMIUM:
        pytest.fail(f"PARALLEL_SCHEDULER_TEST_CHROMIUM={CHROMIUM}: no such file")
    commands = " && ".join(" ".join(step) for step in INSTALL_STEPS)
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        pytest.fail(
            f"the browser tests need Debian's Chromium at {CHROMIUM}: run "
            f"`sudo sh -c '{commands}'` (or point PARALLEL_SCHEDULER_TEST_CHROMIUM at a Chromium "
            "binary); Playwright's own browser download is never used"
        )
    capture = config.pluginmanager.getplugin("capturemanager")
    # One installer at a time: each pytest-xdist worker collects the browser tests, and a second
    # apt-get would fail on dpkg's lock; the one that waited finds the browser installed.
    with INSTALL_LOCK.open("w") as lock, capture.global_and_fixture_disabled():
        fcntl.flock(lock, fcntl.LOCK_EX)
        if Path(CHROMIUM).exists():
            return CHROMIUM
        for step in INSTALL_STEPS:
            print(f"browser tests: {CHROMIUM} is missing; running as root: {' '.join(step)}")
            environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            done = subprocess.run(step, env=environment, check=False)
            if done.returncode != 0:
                pytest.fail(f"`{' '.join(step)}` failed (exit {done.returncode}); see above")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"`{commands}` succeeded but {CHROMIUM} is still missing")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (launching costs about a second)."""
    if "path" not in _chromium:
        pytest.fail(_chromium.get("problem") or "Chromium was not checked at collection")
    executable = _chromium["path"]
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses to start its sandbox as root (CI containers).
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


class Dialogs:
    """Every JavaScript dialog a page opened, dismissed. The dashboard's one script never opens
    one, so any dialog fails the test: above all the ``alert(1)`` of an unescaped ``<script>``
    argument.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def handle(self, dialog: Any) -> None:
        self.seen.append((dialog.type, dialog.message))
        dialog.dismiss()


@pytest.fixture
def dialogs() -> Dialogs:
    return Dialogs()


@pytest.fixture
def page(browser: Any, dialogs: Dialogs) -> Iterator[Any]:
    """A fresh browser context (no cookies) at 1280x800 in UTC (the zone the dashboard then
    shows by default); fails the test if any dialog opened."""
    context = browser.new_context(viewport=VIEWPORT, timezone_id="UTC")
    context.set_default_timeout(STEP_TIMEOUT_MS)
    opened = context.new_page()
    opened.on("dialog", dialogs.handle)
    yield opened
    context.close()
    assert not dialogs.seen, f"a page opened JavaScript dialogs: {dialogs.seen}"


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
