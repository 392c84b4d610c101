"""Smoke test of ``benchmarks/scale_out.py``: at a tiny size (2,000 jobs, 1 and 2 processes,
4 shards), on the real Redis Cluster and PostgreSQL, every run passes its check (each id
dispatched once, nothing left), gets its figures (rate, CPU per process and per storage node,
Redis memory), the projection is made, and the JSON record is appended, never replacing an
earlier one. The figures themselves are not asserted: at 2,000 jobs they mean nothing.

It runs in ``make test`` (a few seconds), so the command the scale-out figures come from cannot
rot unnoticed. Four shards, not the benchmark's 16: the command's path is the same for any count
(``--shards``), and each shard of a run is a set of tables or keys set up and dropped (on
PostgreSQL about 0.2 s a shard), which at 2,000 jobs is most of the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_scripts.smoke import assert_succeeded, run_benchmark
from tests.conftest import POSTGRESQL_URL, redis_cluster_url, require_server


@pytest.mark.postgresql
@pytest.mark.redis_cluster
def test_tiny_runs_are_checked_measured_and_appended(tmp_path: Path) -> None:
    require_server("postgresql")
    require_server("redis-cluster")
    out = tmp_path / "scale_out.jsonl"
    out.write_text('{"kept": true}\n')  # an earlier record, which must survive
    tiny = ["--redis-jobs", "2000", "--pg-jobs", "2000", "--processes", "1", "2", "--shards", "4"]
    urls = ["--redis-cluster-url", redis_cluster_url(), "--postgresql-url", POSTGRESQL_URL]
    done = run_benchmark("scale_out", *tiny, *urls, "--out", str(out), timeout=180)
    assert_succeeded(done)
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == {"kept": True} and len(lines) == 2
    document = json.loads(lines[1])
    runs = {(run["storage"], run["processes"]): run for run in document["runs"]}
    assert set(runs) == {(kind, p) for kind in ("redis-cluster", "postgresql") for p in (1, 2)}
    for (kind, processes), run in runs.items():
        assert run["jobs"] == 2000 and run["shards"] == 4
        assert run["jobs_per_s"] > 0 and run["seconds"] > 0
        assert len(run["per_process"]) == processes
        assert sum(p["released"] for p in run["per_process"]) == 2000  # each id exactly once
        assert run["scheduler_cpu_s_per_1000"] > 0
        nodes = run["storage_cpu_s_per_1000"]
        assert nodes and all(cpu >= 0 for cpu in nodes.values()), nodes  # found by port
        if kind == "redis-cluster":  # every master serving slots (3 in the throwaway cluster)
            assert set(run["redis_used_memory_gained"]) == set(nodes)
            assert run["redis_mib_per_million_jobs"] > 0
    for kind in ("redis-cluster", "postgresql"):
        model = document["projection"][kind]
        if max(runs[kind, 2]["storage_cpu_s_per_1000"].values()) == 0:
            # the servers' CPU of so tiny a run fell under the CPU clock's tick: no model
            assert model is None
            continue
        assert model["storage_limit_jobs_per_s"] > 0
        assert set(model["machines"]) == {"1", "2", "4", "8", "16"}
    # what a published figure must be traceable to
    assert document["environment"]["git_commit"]
    assert len(document["environment"]["load_average_at_start"]) == 3
    assert "scale_out.py" in document["command"]
    assert document["config"]["processes"] == [1, 2]
    assert "| storage | processes |" in done.stdout
