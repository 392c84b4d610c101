"""Measuring for the burst benchmark: distributions, and CPU/memory of the processes involved.

CPU is taken as snapshots of cumulative CPU time at phase boundaries (scheduling, then release and
execution), so a phase's figure is exact for every process that lived through it, not an
average of samples; background samples twice a second keep the CPU time of processes that exit
mid-phase. Memory (PSS) is sampled with them for the peak, which a snapshot at a boundary would
miss.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psutil

__all__ = [
    "Distribution",
    "PeakSampler",
    "ProcessGroup",
    "ResourceMonitor",
    "distribution",
    "process_groups",
    "rss",
    "server_pid",
    "settled_rss",
]

MIB = 1024 * 1024
DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "postgresql": 5432, "postgres": 5432, "amqp": 5672}


@dataclass(frozen=True)
class Distribution:
    """Summary of a sample, in the sample's unit."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


def distribution(values: Sequence[float]) -> Distribution:
    """Mean, percentiles (inclusive method, so p100 would be the max) and max of ``values``."""
    if not values:
        return Distribution(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if len(values) == 1:
        v = float(values[0])
        return Distribution(1, v, v, v, v, v)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return Distribution(
        count=len(values),
        mean=statistics.fmean(values),
        p50=cuts[49],
        p90=cuts[89],
        p99=cuts[98],
        max=float(max(values)),
    )


def server_pid(url: str) -> int | None:
    """The pid listening on ``url``'s port on this machine, or ``None`` (remote, or unreadable).

    Found by port rather than by name, so a second server of the same kind on another port is
    never mistaken for the one under test.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    port = parts.port or DEFAULT_PORTS.get(scheme)
    if port is None:
        return None
    with contextlib.suppress(psutil.AccessDenied):
        for conn in psutil.net_connections(kind="tcp"):
            local_port = getattr(conn.laddr, "port", None)  # an empty tuple for some sockets
            if conn.status == psutil.CONN_LISTEN and local_port == port and conn.pid:
                return int(conn.pid)
    return None


@dataclass
class ProcessGroup:
    """A set of processes counted together: roots plus (optionally) all their descendants.

    A PostgreSQL server is its postmaster and the backends it forks; a worker may fork a pool.
    The last CPU time read of every process is kept after it exits (a backend of a connection
    the pool closed), so its work is not lost from the phase it ran in.
    """

    name: str
    roots: list[int]
    children: bool = True
    peak_memory: int = 0
    last_cpu: dict[int, float] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def processes(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for pid in self.roots:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                root = psutil.Process(pid)
                found.append(root)
                if self.children:
                    found.extend(root.children(recursive=True))
        return found

    def sample(self, memory: bool = True) -> None:
        """Read every process's cumulative CPU (user + system) and, optionally, the group's PSS:
        shared pages split among the processes sharing them, so a PostgreSQL server's shared
        buffers count once, not once per backend as RSS would."""
        total = 0
        for process in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = process.cpu_times()
                with self._guard:
                    self.last_cpu[process.pid] = times.user + times.system
                if memory:
                    total += process.memory_full_info().pss
        if memory:
            self.peak_memory = max(self.peak_memory, total)

    def cpu(self) -> dict[int, float]:
        """Cumulative CPU seconds per pid now, exited processes at their last reading."""
        self.sample(memory=False)
        with self._guard:
            return dict(self.last_cpu)


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two snapshots; a process born in between counts in full."""
    return sum(now - before.get(pid, 0.0) for pid, now in after.items())


@dataclass
class ResourceMonitor:
    """Marks phase boundaries, and samples CPU and peak memory of a few process groups."""

    groups: list[ProcessGroup]
    interval: float = 0.5
    _marks: list[tuple[str, dict[str, dict[int, float]]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sample, name="burst-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            for group in self.groups:
                group.sample()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for group in self.groups:
            group.sample()

    def mark(self, name: str) -> None:
        self._marks.append((name, {g.name: g.cpu() for g in self.groups}))

    def cpu_by_phase(self) -> dict[str, dict[str, float]]:
        """``{group: {phase: cpu seconds}}``, a phase running from its mark to the next one."""
        result: dict[str, dict[str, float]] = {g.name: {} for g in self.groups}
        for (phase, start), (_, end) in zip(self._marks, self._marks[1:], strict=False):
            for group in self.groups:
                used = cpu_between(start[group.name], end[group.name])
                result[group.name][phase] = round(used, 2)
        return result

    def peak_memory_mib(self) -> dict[str, float]:
        return {g.name: round(g.peak_memory / MIB, 1) for g in self.groups}


def merge_pids(*groups: Iterable[int | None]) -> list[int]:
    """Distinct, known pids in first-seen order."""
    seen: list[int] = []
    for group in groups:
        for pid in group:
            if pid is not None and pid not in seen:
                seen.append(pid)
    return seen


def process_groups(system: Any, cfg: Any) -> list[ProcessGroup]:
    """Storage server, broker server, scheduler, workers and this process (the callers)."""
    groups = [ProcessGroup("callers (this process)", [os.getpid()], children=False)]
    storage = system.storage_url()
    storage_pid = server_pid(storage) if storage and not storage.startswith("sqlite") else None
    broker_pid = server_pid(cfg.broker_url)
    if storage_pid is not None and storage_pid != broker_pid:
        groups.append(ProcessGroup("storage server", [storage_pid]))
    if broker_pid is not None:
        shared = " (also storage)" if storage_pid == broker_pid else ""
        groups.append(ProcessGroup(f"broker server{shared}", [broker_pid]))
    if system.scheduler_pids():
        groups.append(ProcessGroup("scheduler", system.scheduler_pids()))
    groups.append(ProcessGroup("workers", merge_pids(system.worker_pids())))
    return groups


def rss(pid: int) -> int:
    """Resident bytes of a process and all its children (the prefork pool)."""
    process = psutil.Process(pid)
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += child.memory_info().rss
    return total


class PeakSampler:
    """Samples RSS in the background, so a peak between two measurements is not missed."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.NoSuchProcess):
                self.peak = max(self.peak, rss(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def settled_rss(pid: int, window: float) -> int:
    """The largest RSS over ``window`` seconds: one reading can land between two allocations."""
    deadline = time.monotonic() + window
    largest = rss(pid)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        largest = max(largest, rss(pid))
    return largest
