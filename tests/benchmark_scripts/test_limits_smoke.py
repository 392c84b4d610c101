"""Smoke test of ``benchmarks/limits.py``, the command the README's "paths vs limits" tables come
from: at a tiny size, against the real servers, every item (each project path and each raw limit)
runs, passes its check and gets a figure, and every path gets its ratio and verdict. The figures
themselves are not asserted: at 200 jobs on a shared machine they mean nothing.

It runs in ``make test`` (a few seconds at 200 jobs), so the command the figures come from
cannot rot unnoticed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.harness.limit_items import ITEMS
from tests.benchmark_scripts.smoke import assert_never_overwrites, assert_succeeded, run_benchmark
from tests.conftest import POSTGRESQL_URL, RABBITMQ_URL, REDIS_URL, require_server


def _limits(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    urls = ["--redis-url", REDIS_URL, "--postgresql-url", POSTGRESQL_URL]
    urls += ["--amqp-url", RABBITMQ_URL]
    return run_benchmark("limits", *urls, *args, timeout=timeout)


@pytest.mark.redis
@pytest.mark.postgresql
@pytest.mark.rabbitmq
def test_every_item_is_checked_and_every_path_compared(tmp_path: Path) -> None:
    for kind in ("redis", "postgresql", "rabbitmq"):
        require_server(kind)
    out = tmp_path / "limits.json"
    tiny = ["--jobs", "200", "--single-jobs", "100", "--repetitions", "1", "--warmup", "0"]
    assert_succeeded(_limits(*tiny, "--out", str(out)))
    document = json.loads(out.read_text())

    groups = document["groups"]
    assert set(groups) == {item.group for item in ITEMS}
    for item in ITEMS:
        row = groups[item.group]["items"][item.name]
        assert row["verified"], (item.key, row["failures"])
        assert len(row["jobs_per_s"]) == 1 and row["median_jobs_per_s"] > 0, item.key
        assert row["median_cpu_ms_per_1000"] >= 0, item.key
    compared = {(c["path"], c["limit"]) for g in groups.values() for c in g["comparisons"]}
    expected = {(i.name, limit) for i in ITEMS for limit, _ in i.compare}
    assert expected <= compared
    for group in groups.values():
        for comparison in group["comparisons"]:
            assert comparison["met"] in ("met", "not met", "-"), comparison
            if comparison["limit"] is not None:
                assert comparison["ratio"] > 0, comparison
    # what a published figure must be traceable to
    assert document["environment"]["git_commit"]
    assert len(document["environment"]["load_average_at_start"]) == 3
    assert [r["round"] for r in document["rounds"]] == ["round 1"]
    assert "limits.py" in document["command"]
    assert {"release_mode", "fast_publish"} <= set(document["settings_defaults"])


def test_an_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    assert_never_overwrites(_limits, tmp_path)
