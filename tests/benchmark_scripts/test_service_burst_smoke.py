"""Smoke test of ``benchmarks/service_burst.py``, the command the README's "Through the service"
table comes from: at a tiny size, against the real servers, every row (PostgreSQL and Redis;
messages built at release and at accept; the recurring burst; a sharded store) releases each job
once through ``parallel-scheduler run --once`` and through ``parallel-scheduler run``, gets the
same path's figure from ``benchmarks/limits.py`` beside it, and leaves no store behind. The
figures themselves are not asserted: at 300 jobs they mean nothing.
"""

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
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'sb%'"
        ).fetchall()
    return {row[0] for row in rows}


def _keys() -> set[bytes]:
    return set(redis.Redis.from_url(REDIS_URL.rsplit("/", 1)[0] + "/3").scan_iter("*sb*"))


@pytest.mark.redis
@pytest.mark.postgresql
def test_every_row_is_checked_through_the_pass_and_the_service(tmp_path: Path) -> None:
    shards = 2  # one shard runs the same per-shard code; test_burst_through_the_service has it
    for kind in ("redis", "postgresql"):
        require_server(kind)
    tables, keys = _tables(), _keys()
    out = tmp_path / "service_burst.json"
    tiny = ["--jobs", "300", "--recurring", "30", "--lead", "2", "--shards", str(shards)]
    tiny += ["--limits"]  # limits.py's figures beside, in the same run
    assert_succeeded(run_benchmark("service_burst", *tiny, "--out", str(out), timeout=300))
    document = json.loads(out.read_text())
    assert document["commit"] and len(document["load_start"]) == 3
    shapes = {(row["storage"], row["kind"], row["messages"]) for row in document["rows"]}
    assert shapes == {
        (storage, kind, messages)
        for storage in ("postgresql", "redis")
        for kind, messages in (
            ("delayed", "built at release"),
            ("delayed", "accept-time"),
            ("recurring", "built at release"),
        )
    }
    for row in document["rows"]:
        assert row["shards"] == shards
        assert row["pass_jobs_per_s"] > 0 and row["service_jobs_per_s"] > 0, row
        assert row["service_peak_rss_mib"] > 10, row  # a Python process's own footprint at least
        if row["kind"] == "delayed":
            assert row["limits_path_jobs_per_s"] > 0 and row["raw_limit_jobs_per_s"] > 0, row
            assert row["service_vs_limits_path"] > 0, row
    # Each run dropped its prefix: the benchmark leaves the shared servers as it found them.
    assert _tables() == tables
    assert _keys() == keys
