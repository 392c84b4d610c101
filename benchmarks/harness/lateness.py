"""Measuring the steady-lateness scenario: due -> event lateness over a window of due times,
its timeline, the scheduler's passes, the scheduler's RSS over time, the machine's CPU and the
storage clock's offset from this machine's."""

from __future__ import annotations

import argparse
import itertools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from benchmarks.harness.measure import MIB, ResourceMonitor, rss
from benchmarks.harness.report import ms_summary
from benchmarks.harness.service_process import ServiceLog
from benchmarks.harness.workloads import PlannedJob, Scheduling

__all__ = [
    "RssTimeline",
    "Window",
    "clock_offset",
    "figures",
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


def figures(
    planned: list[PlannedJob],
    scheduling: Scheduling,
    runs: list[tuple[str, float, float | None]],
    log: ServiceLog,
    window: Window,
    offset: float,
    monitor: ResourceMonitor,
    memory: RssTimeline,
    machine: dict[str, float],
    ns: argparse.Namespace,
) -> dict[str, Any]:
    """The figures of one run that passed its oracles (times moved to the storage clock)."""
    started = [(task_id, at + offset) for task_id, at, _ in runs]
    cpu = monitor.cpu_by_phase()
    measured = sum(phases["retained"] for phases in cpu.values())
    retained_rss = memory.between(window.start - offset, window.end - offset)
    return {
        "due_to_sent_ms": lateness(planned, log.sent, window),
        "due_to_started_ms": lateness(planned, started, window),
        "retained_jobs": sum(1 for job in planned if window.holds(job.due_at)),
        "schedule_jobs_per_s": round(scheduling.created / (scheduling.ended - scheduling.started)),
        "scheduler_cpu_seconds": cpu["scheduler"]["retained"],
        "scheduler_cpu_percent_of_one_core": round(
            100 * cpu["scheduler"]["retained"] / ns.duration, 1
        ),
        "sent_per_s_in_window": sent_rate(log.sent, window),
        "machine_cpu_seconds": machine,
        "machine_cpu_seconds_available": round((os.cpu_count() or 1) * ns.duration, 1),
        "cpu_seconds_other_processes": round(machine["processes"] - measured, 1),
        "scheduler_rss_mib": {
            "start": round(retained_rss[0] / MIB, 1) if retained_rss else None,
            "end": round(retained_rss[-1] / MIB, 1) if retained_rss else None,
            "max": round(max(retained_rss) / MIB, 1) if retained_rss else None,
        },
        "passes": pass_figures(log, window, offset),
        "timeline": timeline(planned, log.sent, window, ns.bin_seconds),
        "cpu_seconds_by_phase": cpu,
        "peak_pss_mib": monitor.peak_memory_mib(),
    }
