"""The oracles every figure waits for: each planned job executed exactly once, nothing lost,
duplicated, unexpected or left in storage. A scenario computes figures only once they pass."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import redis

from benchmarks.harness.workloads import PlannedJob, Scheduling

__all__ = ["executions", "oracles", "wait_for_completion"]


def executions(client: redis.Redis, key: str) -> list[tuple[str, float, float | None]]:
    """Every recorded execution: (task id, executed at, sent at if the system knew it)."""
    rows: list[tuple[str, float, float | None]] = []
    for first in range(0, int(client.llen(key)), 10_000):
        for raw in client.lrange(key, first, first + 9_999):
            parts = (raw.decode() if isinstance(raw, bytes) else raw).split()
            rows.append((parts[0], float(parts[1]), float(parts[2]) if len(parts) > 2 else None))
    return rows


def wait_for_completion(
    system: Any, results: redis.Redis, key: str, expected: int, timeout: float
) -> None:
    """Until every accepted job executed (and, for parallel-scheduler, was released), or timeout;
    a timeout is not an error here: the oracles then report what is missing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        released = not hasattr(system, "released_count") or system.released_count() >= expected
        if released and results.llen(key) >= expected:
            return
        time.sleep(0.05)


def oracles(
    planned: list[PlannedJob], scheduling: Scheduling, runs: list[tuple[str, float, float | None]]
) -> dict[str, int]:
    wanted = {job.id for job in planned}
    counts = Counter(task_id for task_id, _, _ in runs)
    return {
        "not_scheduled": len(planned) - scheduling.created,
        "lost": sum(1 for job_id in wanted if counts[job_id] == 0),
        "duplicated": sum(n - 1 for job_id, n in counts.items() if job_id in wanted and n > 1),
        "unexpected": sum(n for job_id, n in counts.items() if job_id not in wanted),
        "left_in_storage": 0,
    }
