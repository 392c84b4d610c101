"""One checked accept run through the public ``Client``: jobs stored per second, bulk
(``schedule_many``, ``call_size`` jobs per call) or one job per ``schedule`` call (one durable
write, one round trip per call, with per-call latency). ``accept_rate.py`` and ``limits.py``
both measure through ``accept_once``.

Checked before a figure is kept: storage holds exactly the jobs the run stored, all Scheduled,
and the client said each was created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import storage_adapters
from benchmarks.harness.release_runs import CheckFailed, cpu_seconds, run_prefix
from parallel_scheduler import Client, JobSpec, JobState, Settings
from parallel_scheduler.delayed.envelopes import EnvelopeMaker

__all__ = ["accept_once", "percentile"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def accept_once(
    storage_url: str,
    specs: list[JobSpec],
    *,
    shape: str,
    callers: int = 1,
    call_size: int = 1000,
    envelopes: Callable[[], EnvelopeMaker] | None = None,
) -> dict[str, float]:
    """``{"jobs_per_s", "cpu_ms_per_1000"}`` (and ``p50_ms``... for ``single``) of storing
    ``specs`` on a fresh prefix with ``callers`` threads; ``envelopes`` makes the publisher that
    builds each job's broker message as it is accepted (accept-time messages)."""
    storage = storage_adapters.from_url(
        storage_url, prefix=run_prefix("benchaccept"), pool_size=max(callers, 1)
    )
    storage.setup()
    maker = envelopes() if envelopes is not None else None
    client = Client(storage=storage, settings=Settings(storage_url=storage_url), envelopes=maker)
    shares = [specs[c::callers] for c in range(callers)]
    latencies: list[float] = []
    created: list[int] = []
    guard = threading.Lock()

    def bulk(share: list[JobSpec]) -> None:
        made = 0
        for first in range(0, len(share), call_size):
            made += sum(r.created for r in client.schedule_many(share[first : first + call_size]))
        with guard:
            created.append(made)

    def single(share: list[JobSpec]) -> None:
        mine, made = [], 0
        for spec in share:
            started = time.perf_counter()
            made += client.schedule(
                spec.task,
                spec.args,
                spec.kwargs,
                countdown=spec.countdown,
                job_id=spec.id,
                **spec.options,
            ).created
            mine.append(time.perf_counter() - started)
        with guard:
            latencies.extend(mine)
            created.append(made)

    work: Callable[[list[JobSpec]], None] = bulk if shape == "bulk" else single
    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    jobs = len(specs)
    try:
        started, cpu = time.perf_counter(), cpu_seconds()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        counts = storage.count_by_state()  # the oracle, before the figure is kept
        if counts[JobState.SCHEDULED] != jobs or sum(counts.values()) != jobs:
            raise CheckFailed(f"{shape}: storage holds {dict(counts)}, expected {jobs} scheduled")
        if sum(created) != jobs:
            raise CheckFailed(f"{shape}: the client created {sum(created)} of {jobs}")
        result: dict[str, Any] = {"jobs_per_s": jobs / elapsed, "cpu_ms_per_1000": cpu * 1e6 / jobs}
        if latencies:
            result |= {f"p{q}_ms": percentile(latencies, q) * 1000 for q in (50, 90, 99)}
        return result
    finally:
        storage.drop()
        client.close()
        storage.close()
