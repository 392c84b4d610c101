"""Every example of the documentation runs: one test per page of docs/**/*.md and README.md.

The test id is the page's path (with the reasons of its skipped blocks, if any), so
``make pytest ARGS="tests/docs -k tutorial"`` runs one page. The conventions (which blocks run,
the markers, the server URLs) are in ``markdown_examples`` and ``example_servers``; a page that
breaks them fails collection, naming the page and line. A failing example fails its page's test
with the block's page, line and output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tests import conftest as shared
from tests.docs import example_servers
from tests.docs.example_runner import example_environment, run_page
from tests.docs.markdown_examples import Page, extras_named, parse_page

ROOT = Path(__file__).resolve().parents[2]
#: Seconds one page may take in all; each block has its own, shorter deadline.
PAGE_TIMEOUT = 900


def pages() -> list[Page]:
    """Every page with examples to check, parsed (an ``ExampleSyntaxError`` fails collection)."""
    paths = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    return [
        parse_page(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
        for path in paths
        if path.is_file()
    ]


def _runnable_text(page: Page) -> str:
    return "\n".join(block.text for block in (*page.runnable, *page.written))


def _param(page: Page) -> object:
    needs = example_servers.uses(_runnable_text(page))
    marks = [getattr(pytest.mark, kind) for kind in sorted(needs)]
    if page.runnable:
        marks.append(pytest.mark.slow)
    counted = Counter(page.skip_reasons)  # each reason once, in page order, with its count
    reasons = [reason + (f" (x{n})" if n > 1 else "") for reason, n in counted.items()]
    shown = f"{page.path} (skipped: {'; '.join(reasons)})" if reasons else page.path
    return pytest.param(page, id=shown, marks=[*marks, pytest.mark.timeout(PAGE_TIMEOUT)])


PAGES = pages()


@pytest.fixture(scope="module")
def servers() -> Iterator[example_servers.ExampleServers]:
    made = example_servers.ExampleServers()
    try:
        yield made
    finally:
        made.close()


def _check_conventions(page: Page) -> None:
    """What needs no process: the pip extras a page names exist, and its runnable blocks use
    only the example server URLs the runner can isolate."""
    declared = metadata.metadata("parallel-scheduler").get_all("Provides-Extra") or []
    extras = {extra.lower() for extra in declared}
    problems = [
        f"{page.path}:{line}: parallel-scheduler[{extra}] names no extra of pyproject.toml "
        f"(the extras: {', '.join(sorted(extras))})"
        for line, extra in extras_named(page.text)
        if extra.lower().replace("_", "-") not in extras
    ]
    for block in (*page.runnable, *page.written):
        problems.extend(
            f"{page.path}:{block.first_content_line + line - 1}: {address} is not one of the "
            f"example URLs ({example_servers.EXAMPLE_POSTGRESQL}, {example_servers.EXAMPLE_REDIS}"
            f", {example_servers.EXAMPLE_RABBITMQ}), so the runner cannot give the page a "
            "server of its own"
            for line, address in example_servers.stray_server_urls(block.text)
        )
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.mark.parametrize("page", [_param(page) for page in PAGES])
def test_examples(page: Page, tmp_path: Path, servers: example_servers.ExampleServers) -> None:
    _check_conventions(page)
    if not page.runnable:
        return
    needs = example_servers.uses(_runnable_text(page))
    for kind in sorted(needs):
        shared.require_server(kind)
    workdir, logs = tmp_path / "page", tmp_path / "logs"
    workdir.mkdir()
    logs.mkdir()
    with servers.for_page(needs) as urls:
        try:
            run_page(page, workdir, logs, example_environment(), urls.rewrite)
        except AssertionError as failure:
            pytest.fail(str(failure), pytrace=False)
