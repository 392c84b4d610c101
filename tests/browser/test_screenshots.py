"""The docs' screenshots: the overview and the jobs list (the README's two), a job and the
recurring jobs (docs/how-to/dashboard.md), at 1280x800 over the data set.

Every run takes them into the test's tmp dir and checks they are 1280x800 PNGs of the pages.
Only with ``PARALLEL_SCHEDULER_WRITE_SCREENSHOTS=1`` are they also written to docs/screenshots/
(tracked files: CI never rewrites them), e.g.::

    PARALLEL_SCHEDULER_WRITE_SCREENSHOTS=1 \\
        .venv/bin/python -m pytest tests/browser/test_screenshots.py
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import VIEWPORT
from tests.browser.data import DataSet

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WRITE = os.environ.get("PARALLEL_SCHEDULER_WRITE_SCREENSHOTS") == "1"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


# On Redis, so the page names a server rather than a temporary file.
@pytest.mark.parametrize(
    "store_url", [pytest.param("redis", marks=pytest.mark.redis)], indirect=True
)
def test_readme_screenshots(page: Any, dashboard: str, data: DataSet, tmp_path: Path) -> None:
    taken = []
    for name, path, ready in (
        ("overview", "/", "#instances"),
        ("jobs", "/jobs?state=any&tz=Europe/Paris", "#jobs-table tr.job-row"),
        ("job", f"/jobs/detail?id={data.errored[0]}", "#job-timeline"),
        ("recurring", "/recurring", "#recurring-table tr.recurring-row"),
    ):
        page.goto(dashboard + path)
        assert page.locator(ready).count() >= 1
        shot = tmp_path / f"{name}.png"
        page.screenshot(path=str(shot))  # the viewport: exactly 1280x800
        assert _png_size(shot) == (VIEWPORT["width"], VIEWPORT["height"])
        taken.append((name, shot))
    if WRITE:
        DOCS.mkdir(parents=True, exist_ok=True)
        for name, shot in taken:
            shutil.copyfile(shot, DOCS / f"{name}.png")
