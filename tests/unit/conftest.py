"""The unit tier: no server, no worker, seconds in all.

Every test here gets a short timeout (far below the suite's 300 s), so a unit test that starts
waiting on something it should not need fails fast instead of hanging. A test that asks for a
server (a server-backed storage fixture, or ``require_server``) fails with the reason: it belongs
in another tier (tests/storage, tests/scheduler, tests/celery_integration, ...). SQLite in
``tmp_path`` is no server, so it may stay here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest as shared

UNIT_TIMEOUT = 10  # seconds; the slowest unit test takes about 1 s
HERE = Path(__file__).parent
SERVER_FIXTURES = frozenset({"adapter_kind", "make_storage", "storage"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))


@pytest.fixture(autouse=True)
def _no_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse server fixtures and server probes: the unit tier must run with no server at all."""
    asked = SERVER_FIXTURES.intersection(request.fixturenames)
    if asked:
        pytest.fail(f"a unit test may not use a server fixture ({', '.join(sorted(asked))})")

    def refuse(kind: str) -> str | None:
        pytest.fail(f"a unit test may not need a {kind} server: move it to a server tier")

    monkeypatch.setattr(shared, "_problem_with", refuse)
