"""``parallel-scheduler profile``: the whole run, from checks to table, JSON and PNG.

Order matters here. Options and output paths are checked first (nothing runs on a bad one); then
the storage is probed (its round trip, direct and through the latency proxy, and PostgreSQL's free
connections); then every cell runs, each repetition verified; only when the whole sweep passed are
figures printed and files written. Everything the run creates (storage prefixes, the broker
queue, the proxy process, the temporary SQLite directory) is removed on the way out, also when a
check fails or the user presses Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from parallel_scheduler.delayed import scheduler as delayed_scheduler
from parallel_scheduler.profiling import probes
from parallel_scheduler.profiling.latency_proxy import LatencyProxy
from parallel_scheduler.profiling.options import ProfileOptions
from parallel_scheduler.profiling.report import KNEE_RULE, find_knees, summarise, table
from parallel_scheduler.profiling.sweep import PREFIX_STEM, CellResult, Target, run_cell
from parallel_scheduler.profiling.workload import BrokerQueue
from storage_adapters import mask_url
from storage_adapters.urls import scheme_of

__all__ = ["run_profile"]

#: Connections a cell needs beyond its parallelism: the lock renewal and the profile's own.
EXTRA_CONNECTIONS = 2
#: Columns for output to a file or pipe, where rich would otherwise assume 80.
WIDE = 140


@contextmanager
def _quiet_scheduler_log() -> Iterator[None]:
    """One INFO line per pass would bury the progress bar; warnings still show."""
    delayed = logging.getLogger(delayed_scheduler.__name__)
    level = delayed.level
    delayed.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        delayed.setLevel(level)


class _Run:
    """State of one profile run while it goes: where it measures, what it found so far."""

    def __init__(self, options: ProfileOptions, console: Console) -> None:
        self.options = options
        self.console = console
        self.progress = Console(stderr=True)
        self.run_id = uuid.uuid4().hex[:8]
        self.rtt_ms: dict[str, float] = {}
        self.proxy_cpu_seconds: float | None = None
        self.free_connections: tuple[int, int] | None = None
        self.storage_url = ""
        self.broker: BrokerQueue | None = None

    def prepare(self, stack: ExitStack) -> Target:
        """Storage, RTT, proxy and broker, each registered on ``stack`` for clean-up."""
        options = self.options
        url = options.storage_url
        if url is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ps-profile-"))
            url = f"sqlite:///{Path(folder) / 'profile.db'}"
        scheme_of(url)
        self.storage_url = url
        upstream = None if options.latency_ms is None else probes.server_address(url)
        scheduler_url = url
        if probes.is_networked(url):
            self.rtt_ms["direct"] = probes.measure_rtt(url) * 1000
            self.free_connections = probes.connection_headroom(url)
        if upstream is not None and options.latency_ms is not None:
            proxy = stack.enter_context(LatencyProxy(upstream, options.latency_ms / 1000))
            stack.callback(self._note_proxy_cpu, proxy)
            scheduler_url = probes.via_proxy(url, proxy.port)
            self.rtt_ms["through_proxy"] = probes.measure_rtt(scheduler_url) * 1000
        if options.uses_broker:
            self.broker = BrokerQueue(options.broker, self.run_id)
            stack.callback(self.broker.close)
            self.broker.check()
        return Target(
            self.run_id, url, scheduler_url, options.release_mode, options.seed, self.broker
        )

    def _note_proxy_cpu(self, proxy: LatencyProxy) -> None:
        self.proxy_cpu_seconds = proxy.cpu_seconds()

    def print_rtt(self) -> None:
        delay = self.options.latency_ms
        for path, value in self.rtt_ms.items():
            label = "direct" if path == "direct" else f"through the proxy (+{delay:g} ms each way)"
            self.console.print(
                f"storage RTT {label}: {value:.3f} ms "
                f"(median of {probes.RTT_SAMPLES} trivial round trips)"
            )

    def skip_reason(self, parallelism: int) -> str | None:
        if self.free_connections is None:
            return None
        free, maximum = self.free_connections
        needed = parallelism + EXTRA_CONNECTIONS
        if needed <= free:
            return None
        return f"needs {needed} connections, {free} free (max_connections {maximum})"

    def sweep(self, target: Target) -> list[CellResult]:
        options = self.options
        cells = [(b, p) for b in options.batch_sizes for p in options.parallelism]
        runnable = [cell for cell in cells if self.skip_reason(cell[1]) is None]
        passes = len(runnable) * (options.warmup + options.repetitions)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        results = []
        with Progress(*columns, TimeElapsedColumn(), console=self.progress, transient=True) as bar:
            task = bar.add_task("profile", total=passes)
            started = 0

            def starting(where: str) -> None:
                nonlocal started
                bar.update(task, completed=started, description=where)
                started += 1

            for batch_size, parallelism in cells:
                reason = self.skip_reason(parallelism)
                if reason is None:
                    results.append(
                        run_cell(
                            target, batch_size, parallelism, options.repetitions,
                            options.warmup, on_pass=starting,
                        )
                    )  # fmt: skip
                    continue
                self.console.print(
                    f"[yellow]skipped batch size {batch_size} x parallelism {parallelism}: "
                    f"{reason}[/yellow]"
                )
                results.append(CellResult(batch_size, parallelism, skipped=reason))
        return results

    def title(self) -> str:
        options = self.options
        kind = scheme_of(self.storage_url).split("+")[0]
        rtt = self.rtt_ms.get("through_proxy", self.rtt_ms.get("direct"))
        where = f"{kind}" + ("" if rtt is None else f" (RTT {rtt:.2f} ms)")
        broker = mask_url(options.broker) if options.uses_broker else "none"
        return (
            f"parallel-scheduler profile: {where}, broker {broker}, "
            f"release {options.release_mode}, median of {options.repetitions}"
        )


def _package_version() -> str:
    try:
        return version("parallel-scheduler")
    except PackageNotFoundError:
        return "unknown"


def _document(
    run: _Run, cells: list[CellResult], started_at: datetime, total: float
) -> dict[str, Any]:
    options = run.options
    summaries = summarise(cells)
    verified = [cell for cell in cells if cell.seconds]
    passes = sum(len(c.seconds) + len(c.warmup_seconds) for c in verified)
    jobs = sum((len(c.seconds) + len(c.warmup_seconds)) * c.batch_size for c in verified)
    shown = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()}
    shown["storage_url"] = mask_url(run.storage_url)
    shown["broker"] = mask_url(options.broker) if options.uses_broker else "none"
    return {
        "tool": "parallel-scheduler profile",
        "version": _package_version(),
        "run_id": run.run_id,
        "storage_prefixes": f"{PREFIX_STEM}{run.run_id}_*",
        "broker_queue": None if run.broker is None else run.broker.name,
        "started_at": started_at.isoformat(),
        "total_seconds": round(total, 3),
        "options": shown,
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
        },
        "rtt_ms": {**run.rtt_ms, "samples": probes.RTT_SAMPLES},
        "proxy_cpu_seconds": run.proxy_cpu_seconds,
        "verification": {
            "passes": passes,
            "jobs": jobs,
            "rule": "after every pass, warm-ups included: the pass released all N jobs; the "
            "dispatcher saw each id exactly once; storage holds every id enqueued, none "
            "scheduled or claimed; with a broker, its queue received exactly N messages",
        },
        "knee_rule": KNEE_RULE,
        "knees": {str(size): knee for size, knee in find_knees(summaries).items()},
        "cells": [
            {**asdict(cell), **summary.as_dict()}
            for cell, summary in zip(cells, summaries, strict=True)
        ],
    }


def run_profile(options: ProfileOptions, console: Console | None = None) -> int:
    """Run the profile and return 0, or raise ``ProfileError`` with nothing printed or written."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console.width = max(console.width, WIDE)  # a file or pipe: do not wrap the table
    options.check()
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    run = _Run(options, console)
    with ExitStack() as stack, _quiet_scheduler_log():
        target = run.prepare(stack)
        run.print_rtt()
        cells = run.sweep(target)
    total = time.perf_counter() - started
    document = _document(run, cells, started_at, total)
    summaries = summarise(cells)
    knees = find_knees(summaries)
    checked = document["verification"]
    console.print(
        f"verified: {checked['passes']} passes, {checked['jobs']:,} jobs, each released exactly "
        "once, none lost"
    )
    console.print(table(summaries, knees, run.title()))
    for skipped in (s for s in summaries if s.skipped):
        console.print(
            f"skipped batch size {skipped.batch_size:,} x parallelism {skipped.parallelism}: "
            f"{skipped.skipped}"
        )
    for size, knee in knees.items():
        console.print(f"knee for batch size {size:,}: parallelism {knee}")
    console.print(f"total run time: {total:.1f} s")
    with options.out.open("x") as file:
        json.dump(document, file, indent=2)
        file.write("\n")
    console.print(f"wrote {options.out}")
    if options.png is not None:
        from parallel_scheduler.profiling.plot import draw

        draw(summaries, knees, run.title(), options.png)
        console.print(f"wrote {options.png}")
    return 0
