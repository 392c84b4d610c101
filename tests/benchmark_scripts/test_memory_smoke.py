"""Smoke test of ``benchmarks/memory.py``, the command the README's memory figures come from (the
"Memory with 1,000,000 waiting jobs" section and the quick start's worker memory table): at a
tiny size, against the real servers, both parts run and pass their checks: the scheduler part on
PostgreSQL and Redis (a scheduler process and a plugin worker, waiting jobs stored, probes
released and run once), the worker part with plain Celery and with the plugin (every delayed
call received by the plain worker, every one stored by the plugin). Each run gets its figures,
the plain one its labelled extrapolation; the JSON records the commit and the load average. The
figures themselves are not asserted: at this size they mean nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.benchmark_scripts.smoke import assert_never_overwrites, assert_succeeded, run_benchmark
from tests.conftest import POSTGRESQL_URL, REDIS_URL, require_server

TINY = [
    "--jobs", "2000", "--chunk", "500", "--callers", "2", "--probes", "20",
    "--warmup-passes", "1", "--passes", "2", "--window", "0.1", "--settle", "0.5",
    "--calls", "200", "--timeout", "120",
]  # fmt: skip


def _memory(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return run_benchmark("memory", *args, timeout=timeout)


@pytest.mark.slow
@pytest.mark.celery
@pytest.mark.redis
@pytest.mark.postgresql
def test_both_parts_run_checked_and_measured(tmp_path: Path) -> None:
    for kind in ("redis", "postgresql"):
        require_server(kind)
    out = tmp_path / "memory.json"
    pg = POSTGRESQL_URL.replace("postgresql+psycopg://", "postgresql://")
    urls = ["--storage-url", pg, "--storage-url", REDIS_URL, "--broker-url", REDIS_URL]
    done = _memory(*TINY, *urls, "--worker-storage-url", REDIS_URL, "--out", str(out))
    assert_succeeded(done)
    document = json.loads(out.read_text())
    assert document["passed"] and document["part"] == "all"
    assert [run["storage_url"] for run in document["storages"]] == [pg, REDIS_URL]
    for run in document["storages"]:
        assert not any(run["oracles"].values()), run["oracles"]
        figures = run["figures"]
        assert figures["jobs_waiting"] == 2000 and figures["passes_with_jobs_waiting"] >= 1
        for process in ("scheduler_rss_mib", "worker_rss_mib"):
            assert figures[process]["after_passes_with_jobs_waiting"] > 0, figures
    runs = {run["scenario"]: run for run in document["worker_calls"]["runs"]}
    assert set(runs) == {"plain", "plugin"}
    assert runs["plain"]["figures"]["worker_received"] == 200
    assert runs["plain"]["figures"]["extrapolated_rss_mib_at_1m"] > 0
    assert runs["plugin"]["figures"]["stored"] == 200
    assert "extrapolated_rss_mib_at_1m" not in runs["plugin"]["figures"]
    # what a published figure must be traceable to
    assert document["environment"]["git_commit"]
    assert len(document["environment"]["load_average_at_start"]) == 3
    assert len(document["environment"]["load_average_at_end"]) == 3
    assert "| scheduler process |" in done.stdout and "**extrapolated**" in done.stdout


def test_an_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    assert_never_overwrites(_memory, tmp_path)
