"""Measuring the steady-lateness scenario: due -> event lateness over a window of due times,
its timeline, the scheduler's passes, the scheduler's RSS over time, the machine's CPU and the
storage clock's offset from this machine's."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from .measure import rss
from .report import ms_summary
from .service_process import ServiceLog
from .workloads import PlannedJob

__all__ = [
    "RssTimeline",
    "Window",
    "clock_offset",
    "lateness",
    "machine_cpu",
    "pass_figures",
    "sent_rate",
    "timeline",
]


def _ms(values: Sequence[float]) -> dict[str, float]:
    return ms_summary(values, with_min=True)


class RssTimeline(threading.Thread):
    """The scheduler process's RSS (psutil), once a second, with the time of each reading."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        super().__init__(name="rss-timeline", daemon=True)
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.samples.append((time.time(), rss(self.pid)))
            except Exception:  # the process ended; the harness notices on its own
                return
            self.halt.wait(self.interval)

    def between(self, start: float, end: float) -> list[int]:
        return [value for at, value in self.samples if start <= at <= end]


def machine_cpu() -> dict[str, float]:
    """The whole machine's cumulative CPU seconds, all cores together: in processes (user, nice,
    system; Linux counts guest time inside user), in interrupt handlers (irq, softirq: loopback
    networking lands here, in no process), and stolen by the hypervisor (steal)."""
    times = psutil.cpu_times()

    def field(name: str) -> float:
        return float(getattr(times, name, 0.0))

    return {
        "processes": field("user") + field("nice") + field("system"),
        "interrupts": field("irq") + field("softirq"),
        "steal": field("steal"),
    }


def sent_rate(sent: Sequence[tuple[str, float]], window: Window) -> float:
    """Jobs handed to the broker per second while the window lasted (whatever their due time):
    the scheduler's release rate, which is below ``--rate`` when it falls behind."""
    return round(sum(1 for _, at in sent if window.holds(at)) / (window.end - window.start), 1)


def clock_offset(storage_now: Any, samples: int = 5) -> float:
    """Storage clock minus this machine's, from the reading with the shortest round trip."""
    best_rtt, best = float("inf"), 0.0
    for _ in range(samples):
        before = time.time()
        server = float(storage_now())
        after = time.time()
        if after - before < best_rtt:
            best_rtt, best = after - before, server - (before + after) / 2
    return best


@dataclass
class Window:
    """The retained sample: jobs due in [start, end) (storage clock)."""

    start: float
    end: float

    def holds(self, moment: float) -> bool:
        return self.start <= moment < self.end


def lateness(
    planned: list[PlannedJob], events: Sequence[tuple[str, float]], window: Window
) -> dict[str, float]:
    """due -> event, ms, over the first event of each job due in ``window``."""
    due = {job.id: job.due_at for job in planned}
    first: dict[str, float] = {}
    for job_id, at in events:
        first.setdefault(job_id, at)
    values = [at - due[i] for i, at in first.items() if i in due and window.holds(due[i])]
    found = _ms(values)
    found["early"] = sum(1 for v in values if v < 0)
    return found


def timeline(
    planned: list[PlannedJob], sent: Sequence[tuple[str, float]], window: Window, width: float
) -> list[dict[str, float]]:
    """due -> sent per ``width`` seconds of due time: is the lateness steady, or growing?"""
    due = {job.id: job.due_at for job in planned}
    bins: dict[int, list[float]] = {}
    for job_id, at in sent:
        moment = due.get(job_id)
        if moment is not None and window.holds(moment):
            bins.setdefault(int((moment - window.start) // width), []).append(at - moment)
    rows = []
    for index in sorted(bins):
        figures = _ms(bins[index])
        rows.append(
            {
                "from_s": round(index * width, 1),
                "jobs": figures["count"],
                "p50_ms": figures["p50"],
                "p99_ms": figures["p99"],
                "max_ms": figures["max"],
            }
        )
    return rows


def pass_figures(log: ServiceLog, window: Window, offset: float) -> dict[str, Any]:
    """Delayed-scheduler passes that overlapped the window (their times are this machine's clock,
    moved to the storage clock): how often, how long, how many jobs, and the idle gaps between.
    A pass repeats while full batches come back, so a scheduler that fell behind runs few, long
    passes."""
    passes = sorted(
        p for p in log.passes if p[0] + offset < window.end and p[0] + p[1] + offset >= window.start
    )
    held = [p for p in passes if p[2]]
    gaps = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(passes)]
    seconds = window.end - window.start
    return {
        "passes": len(passes),
        "passes_holding_lock": len(held),
        "passes_per_s": round(len(passes) / seconds, 1),
        "jobs_released_per_pass": round(sum(p[4] for p in held) / max(1, len(held)), 1),
        "pass_duration_ms": _ms([p[1] for p in held]),
        "idle_between_passes_ms": _ms(gaps),
    }
