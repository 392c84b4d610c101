"""The burst scenario's figures of one repetition, and its Markdown report: medians over the
retained repetitions.

Called only after every oracle passed, so no figure of a failed run is ever shown. One table puts
the systems side by side (one column each), a second gives CPU and memory per process.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from benchmarks.harness.measure import ResourceMonitor
from benchmarks.harness.report import ms_summary
from benchmarks.harness.workloads import PlannedJob, Scheduling

__all__ = ["figures", "markdown_report", "print_summary"]

STATS = ("mean", "p50", "p90", "p99", "max")
Figures = dict[str, Any]


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def _rate_cell(reps: list[Figures], key: str) -> str:
    values = [r[key] for r in reps]
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    low, high = min(known), max(known)
    return f"{_number(_median(values))} ({_number(low)}-{_number(high)})"


def _distribution_cell(reps: list[Figures], key: str) -> str:
    if any(r[key] is None for r in reps):
        return "n/a"
    return " / ".join(_number(_median([r[key][s] for r in reps])) for s in STATS)


Row = tuple[str, Callable[[list[Figures]], str]]
ROWS: list[Row] = [
    ("scheduling throughput, jobs/s", lambda r: _rate_cell(r, "schedule_jobs_per_s")),
    ("schedule call latency, ms (mean / p50 / p90 / p99 / max)",
     lambda r: _distribution_cell(r, "schedule_call_ms")),
    ("release throughput, jobs/s (first due -> last sent)",
     lambda r: _rate_cell(r, "release_jobs_per_s")),
    ("lateness due -> sent, ms (mean / p50 / p90 / p99 / max)",
     lambda r: _distribution_cell(r, "due_to_sent_ms")),
    ("execution throughput, jobs/s (first due -> last executed)",
     lambda r: _rate_cell(r, "execute_jobs_per_s")),
    ("lateness due -> executed, ms (mean / p50 / p90 / p99 / max)",
     lambda r: _distribution_cell(r, "due_to_executed_ms")),
]  # fmt: skip


def _main_table(systems: list[dict[str, Any]]) -> list[str]:
    header = "| measure | " + " | ".join(s["system"] for s in systems) + " |"
    rule = "|---|" + "--:|" * len(systems)
    lines = [header, rule]
    figures = [[rep["figures"] for rep in s["repetitions"]] for s in systems]
    for label, cell in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(f) for f in figures) + " |")
    oracle = [_oracle_cell(s["repetitions"]) for s in systems]
    lines.append(
        "| lost / duplicated / not scheduled (all repetitions) | " + " | ".join(oracle) + " |"
    )
    lines.append("| release measured by | " + " | ".join(
        s["repetitions"][0]["figures"]["release_measured_by"] for s in systems) + " |")  # fmt: skip
    return lines


def _oracle_cell(reps: list[dict[str, Any]]) -> str:
    totals = [sum(r["oracles"][k] for r in reps) for k in ("lost", "duplicated", "not_scheduled")]
    return " / ".join(str(t) for t in totals)


def _resource_table(systems: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| system | process | CPU s while scheduling | CPU s release + execution "
        "| peak memory (PSS) MiB |",
        "|---|---|--:|--:|--:|",
    ]
    for s in systems:
        reps = [rep["figures"] for rep in s["repetitions"]]
        for group in reps[0]["cpu_seconds"]:
            during = _median([r["cpu_seconds"][group].get("scheduling") for r in reps])
            after = _median([r["cpu_seconds"][group].get("release and execution") for r in reps])
            peak = _median([r["peak_memory_mib"][group] for r in reps])
            lines.append(
                f"| {s['system']} | {group} | {_number(during)} | {_number(after)} "
                f"| {_number(peak)} |"
            )
    return lines


def _heading(document: dict[str, Any]) -> list[str]:
    o = document["options"]
    env = document["environment"]
    return [
        f"Burst: {o['jobs']:,} jobs scheduled by {o['callers']} threads in calls of "
        f"{o['call_size']}, all due at one instant; {o['workers']} worker processes; storage "
        f"`{o['storage_url']}`, broker `{o['broker_url']}`, release mode `{o['release_mode']}`, "
        f"parallelism {o['parallelism']}, batch size {o['batch_size']}, dispatcher "
        f"`{o['dispatcher']}`"
        f"{' with accept-time messages' if o.get('accept_time_messages') else ''}. "
        f"Median of {o['repetitions']} repetitions (range in brackets) "
        f"after {o['warmup']} warm-up run(s) of {o['warmup_jobs']:,} jobs; seed {o['seed']}; "
        f"{env['cpus']} CPUs, Python {env['python']}, Celery {env['celery']}, "
        f"Redis {env['redis_server']}; load average (1/5/15 min) "
        f"{'/'.join(str(x) for x in env['load_average_at_start'])} at the start, "
        f"{'/'.join(str(x) for x in env['load_average_at_end'])} at the end.",
        "",
    ]


def _problems(systems: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for s in systems:
        for rep in s["repetitions"]:
            lines.extend(f"- {s['system']} {rep['label']}: {p}" for p in rep["problems"])
    return ["", "Problems:", *lines] if lines else []


NOTES = [
    "Notes:",
    "- sent: when parallel-scheduler's release listener is told, i.e. after the broker took the "
    "job's chunk and storage marked it Enqueued (storage clock); for rq, `job.enqueued_at` as "
    "stamped by rq's scheduler. Executed: the worker's clock when the task body ran. All "
    "clocks are this machine's.",
    "- Throughputs run from the first due instant to the last job sent / executed; scheduling "
    "throughput from the first call's start to the last call's end.",
    "- Plain Celery has no release step to time: the worker's parent process receives every "
    "countdown message at once and holds it in memory until it is due. rq's scheduler and "
    "huey's consumer look for due jobs once a second (their defaults; 1 s is huey's minimum), "
    "so up to a second of lateness is by their design.",
    "- celery-redbeat is not measured: it stores periodic beat entries, not one-off delayed "
    "jobs, and a burst of 50,000 one-off entries would measure a misuse, not the tool.",
    "- CPU and memory of the storage and broker servers are whole-server figures on a machine "
    "shared with other work; memory is the peak proportional set size (PSS).",
]


def markdown_report(document: dict[str, Any]) -> str:
    systems = document["systems"]
    lines = [
        *_heading(document),
        *_main_table(systems),
        "",
        *_resource_table(systems),
        *_problems(systems),
        "",
        *NOTES,
    ]
    return "\n".join(lines) + "\n"


def print_summary(document: dict[str, Any]) -> None:
    print(markdown_report(document))


# -- the figures of one repetition ------------------------------------------------------------


def figures(
    planned: list[PlannedJob],
    scheduling: Scheduling,
    runs: list[tuple[str, float, float | None]],
    sent: list[tuple[str, float]] | None,
    system: Any,
    monitor: ResourceMonitor,
) -> dict[str, Any]:
    due = {job.id: job.due_at for job in planned}
    first_due = min(due.values())
    first_run: dict[str, tuple[float, float | None]] = {}
    for task_id, at, sent_at in runs:
        first_run.setdefault(task_id, (at, sent_at))
    if sent is None and any(s is not None for _, s in first_run.values()):
        sent = [(i, s) for i, (_, s) in first_run.items() if s is not None]
    span = max(scheduling.ended - scheduling.started, 1e-9)
    figures: dict[str, Any] = {
        "schedule_jobs_per_s": round(scheduling.created / span),
        "schedule_seconds": round(span, 2),
        "schedule_call_ms": ms_summary(scheduling.latencies),
        "execute_jobs_per_s": _rate(len(first_run), first_due, [a for a, _ in first_run.values()]),
        "due_to_executed_ms": ms_summary(
            [a - due[i] for i, (a, _) in first_run.items() if i in due]
        ),
        "release_jobs_per_s": None,
        "due_to_sent_ms": None,
        "release_measured_by": system.release_note,
        "cpu_seconds": monitor.cpu_by_phase(),
        "peak_memory_mib": monitor.peak_memory_mib(),
    }
    if sent:
        first_sent: dict[str, float] = {}
        for job_id, at in sent:
            first_sent.setdefault(job_id, at)
        figures["release_jobs_per_s"] = _rate(len(first_sent), first_due, list(first_sent.values()))
        figures["due_to_sent_ms"] = ms_summary(
            [max(0.0, at - due[i]) for i, at in first_sent.items()]
        )
    return figures


def _rate(count: int, first_due: float, times: list[float]) -> float | None:
    """Jobs per second from the first due instant to the last event."""
    if not times:
        return None
    return round(count / max(max(times) - first_due, 1e-3))
