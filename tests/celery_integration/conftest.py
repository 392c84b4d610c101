"""Fixtures of the Celery tier: a test's own Celery world (``celery_cluster.py``), closed when the
test ends; ``cluster`` runs the test once per broker kind, ``redis_cluster`` on Redis only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celery_integration.celery_cluster import KINDS, Cluster, running


@pytest.fixture(params=KINDS)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running(str(request.param), tmp_path)


@pytest.fixture
def redis_cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from running("redis", tmp_path)
