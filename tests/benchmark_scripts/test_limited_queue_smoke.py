"""Smoke test of ``benchmarks/limited_queue.py``: at a tiny size, against the real servers, each
storage's burst is released once through ``parallel-scheduler run --once`` and through
``parallel-scheduler run``, alone and beside a rate-limited queue whose backlog got its slots in a
first pass (the script checks every burst job went once and the limited queue stayed within its
budget before it keeps a figure), and no store is left behind. The figures themselves are not
asserted: at 300 jobs they mean nothing."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
import redis

from tests.benchmark_scripts.smoke import assert_succeeded, run_benchmark
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server


def _tables() -> set[str]:
    url = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'lq%'"
        ).fetchall()
    return {row[0] for row in rows}


def _keys() -> set[bytes]:
    return set(redis.Redis.from_url(REDIS_URL.rsplit("/", 1)[0] + "/3").scan_iter("*lq*"))


@pytest.mark.redis
@pytest.mark.postgresql
def test_the_burst_beside_a_limited_queue_is_checked_and_measured(tmp_path: Path) -> None:
    for kind in ("redis", "postgresql"):
        require_server(kind)
    tables, keys = _tables(), _keys()
    out = tmp_path / "limited_queue.json"
    tiny = ["--jobs", "300", "--limited", "500", "--rate", "20", "--lead", "2"]
    tiny += ["--repetitions", "1"]
    assert_succeeded(run_benchmark("limited_queue", *tiny, "--out", str(out), timeout=300))
    document = json.loads(out.read_text())
    assert document["commit"] and len(document["load_start"]) == 3
    assert [row["storage"] for row in document["rows"]] == ["postgresql", "redis"]
    for row in document["rows"]:
        # the first pass sent the one slot that was free and gave the others theirs
        assert row["beside_limited"]["deferred_in_first_pass"] == 499, row
        assert 0 < row["limited_released"] < 500, row
        assert row["pass_ratio"] > 0 and row["service_ratio"] > 0, row
    assert _tables() == tables
    assert _keys() == keys
