"""The workloads the scenarios store: planned jobs (the same ids, payloads and due times for
every system, drawn from a seed), callers scheduling them concurrently, and due jobs stored in
bulk for a release pass."""

from __future__ import annotations

import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PlannedJob", "Scheduling", "calls_of", "plan_jobs", "schedule_concurrently"]


@dataclass(frozen=True)
class PlannedJob:
    """One job of the workload: the same for every system in one repetition."""

    id: str
    index: int
    token: str
    due_at: float


def plan_jobs(
    seed: int, label: str, count: int, due_at: float, spread: float, payload: int
) -> list[PlannedJob]:
    """The same ids and payloads for every system in a repetition: drawn from ``seed`` and the
    repetition's label only."""
    rng = random.Random(f"{seed}/{label}")
    return [
        PlannedJob(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            index=i,
            token=rng.randbytes(payload // 2).hex(),
            due_at=due_at + (spread * i / count if count > 1 else 0.0),
        )
        for i in range(count)
    ]


def calls_of(jobs: list[PlannedJob], size: int) -> list[list[PlannedJob]]:
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


@dataclass
class Scheduling:
    """What the callers did: per-call latency, accepted jobs, and the phase's wall-clock span."""

    latencies: list[float] = field(default_factory=list)
    created: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0


def schedule_concurrently(
    system: Any, jobs: list[PlannedJob], callers: int, size: int
) -> Scheduling:
    """``callers`` threads take calls from one list until none is left, as a burst of web requests
    would; a failed call counts its jobs as not scheduled, it does not stop the others."""
    result = Scheduling()
    guard = threading.Lock()

    def one_call(call: list[PlannedJob]) -> None:
        began = time.perf_counter()
        try:
            created = system.schedule(call)
        except Exception as exc:
            with guard:
                result.errors.append(f"{type(exc).__name__}: {exc}")
            return
        took = time.perf_counter() - began
        with guard:
            result.latencies.append(took)
            result.created += created

    result.started = time.time()
    with ThreadPoolExecutor(callers, thread_name_prefix="burst-caller") as pool:
        list(pool.map(one_call, calls_of(jobs, size)))
    result.ended = time.time()
    return result
