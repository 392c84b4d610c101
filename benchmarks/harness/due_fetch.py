"""The scale half of the soak scenario: storing many jobs quickly, timing
``fetch_due_ids(1000)``, and PostgreSQL's plan for the adapter's due query."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from storage_adapters import NewJob, Storage

__all__ = ["FETCH", "SMALL", "at", "explain_due_query", "store", "time_fetch"]

SMALL, FETCH = 10_000, 1000
PAGE = 5000


def store(storage: Storage, first: int, count: int, due: Callable[[int], float]) -> None:
    """Jobs ``soak-<first>`` … in pages of 5,000 (one transaction each)."""
    for start in range(first, first + count, PAGE):
        stop = min(first + count, start + PAGE)
        storage.add_jobs(
            [
                NewJob(f"soak-{i}", "soak.noop", '{"args":[],"kwargs":{}}', due(i))
                for i in range(start, stop)
            ]
        )


def at(moment: float) -> Callable[[int], float]:
    """Every job due at ``moment``."""
    return lambda _: moment


def time_fetch(storage: Storage, runs: int = 50) -> dict[str, float]:
    for _ in range(5):  # warm the plan cache and the pool
        storage.fetch_due_ids(FETCH)
    timings = []
    for _ in range(runs):
        began = time.perf_counter()
        ids = storage.fetch_due_ids(FETCH)
        timings.append((time.perf_counter() - began) * 1000)
        assert len(ids) == FETCH, f"expected a full batch of {FETCH}, got {len(ids)}"
    timings.sort()
    return {
        "median_ms": statistics.median(timings),
        "p95_ms": timings[int(len(timings) * 0.95) - 1],
        "min_ms": timings[0],
    }


def explain_due_query(storage: Storage) -> str:
    """PostgreSQL's plan for the adapter's own due statement (benchmark-only private access)."""
    from sqlalchemy.dialects import postgresql

    engine = storage._engine  # type: ignore[attr-defined]
    statement = storage._sql.fetch_due  # type: ignore[attr-defined]
    table = storage._tables.jobs.name  # type: ignore[attr-defined]
    compiled = statement.compile(dialect=postgresql.dialect())  # type: ignore[no-untyped-call]
    with engine.connect() as conn:
        conn.exec_driver_sql(f"ANALYZE {table}")
        rows = conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS) " + str(compiled), {**compiled.params, "limit": FETCH}
        ).all()
    return "\n".join("    " + row[0] for row in rows)
