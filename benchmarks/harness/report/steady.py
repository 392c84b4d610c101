"""The steady-lateness scenario's Markdown summary: one column per run, then each run's timeline
of due -> sent per bin of due time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TARGET_P99_MS", "summary"]

TARGET_P99_MS = 100.0


def _stats(
    found: dict[str, float], keys: Sequence[str] = ("mean", "p50", "p90", "p99", "max")
) -> str:
    return " / ".join(f"{found[k]:,.1f}" for k in keys)


def _oracle_cell(run: dict[str, Any]) -> str:
    keys = ("lost", "duplicated", "not_scheduled", "left_in_storage", "sent_twice")
    return " / ".join(str(run["oracles"][k]) for k in keys)


def _target_cell(figures: dict[str, Any]) -> str:
    return "met" if figures["due_to_sent_ms"]["p99"] <= TARGET_P99_MS else "MISSED"


def _early_cell(figures: dict[str, Any]) -> str:
    sent = figures["due_to_sent_ms"]
    return f"{sent['early']:.0f}, {sent['min']:.1f}"


def _cpu_cell(figures: dict[str, Any]) -> str:
    seconds = figures["scheduler_cpu_seconds"]
    return f"{seconds:.1f} ({figures['scheduler_cpu_percent_of_one_core']}%)"


def _rss_cell(figures: dict[str, Any]) -> str:
    return " / ".join(str(figures["scheduler_rss_mib"][k]) for k in ("start", "end", "max"))


def _passes_cell(figures: dict[str, Any]) -> str:
    passes = figures["passes"]
    return f"{passes['passes_per_s']}; {passes['jobs_released_per_pass']}"


def _machine_cell(figures: dict[str, Any]) -> str:
    machine = figures["machine_cpu_seconds"]
    busy = machine["processes"] + machine["interrupts"]
    return (
        f"{busy:.0f} of {figures['machine_cpu_seconds_available']:.0f} (other processes "
        f"{figures['cpu_seconds_other_processes']:.0f}, interrupts {machine['interrupts']:.0f}); "
        f"steal {machine['steal']:.0f}"
    )


Cell = Callable[[dict[str, Any]], str]
ROWS: list[tuple[str, Cell]] = [
    ("jobs in the retained window", lambda f: f"{f['retained_jobs']:,}"),
    (
        "due -> sent (broker accepted + marked), ms: mean / p50 / p90 / p99 / max",
        lambda f: _stats(f["due_to_sent_ms"]),
    ),
    (f"p99 due -> sent <= {TARGET_P99_MS:g} ms", _target_cell),
    (
        "due -> task started on the worker, ms: mean / p50 / p90 / p99 / max",
        lambda f: _stats(f["due_to_started_ms"]),
    ),
    ("sent before due (count, min ms)", _early_cell),
    ("scheduler CPU in the window, s (% of one core)", _cpu_cell),
    ("jobs sent per s in the window", lambda f: f"{f['sent_per_s_in_window']:,}"),
    ("scheduler RSS in the window, MiB: start / end / max", _rss_cell),
    ("scheduler passes per s; jobs released per pass", _passes_cell),
    (
        "pass duration, ms: p50 / p99 / max",
        lambda f: _stats(f["passes"]["pass_duration_ms"], ("p50", "p99", "max")),
    ),
    (
        "idle between passes, ms: p50 / p99 / max",
        lambda f: _stats(f["passes"]["idle_between_passes_ms"], ("p50", "p99", "max")),
    ),
    ("scheduling ahead, jobs/s", lambda f: f"{f['schedule_jobs_per_s']:,}"),
    ("machine CPU busy in the window, s", _machine_cell),
]


def _heading(document: dict[str, Any]) -> str:
    o, env = document["options"], document["environment"]
    return (
        f"Steady lateness: {o['rate']:,g} due jobs/s for {o['duration']:g} s (after a "
        f"{o['warmup_seconds']:g} s warm-up), storage `{o['storage_url']}`, broker "
        f"`{o['broker_url']}`, release_mode `{o['release_mode']}`, fast_publish "
        f"{o['fast_publish']}, poll_interval {o['poll_interval']:g} s, parallelism "
        f"{o['parallelism']}, batch_size {o['batch_size']}; one celery worker with "
        f"{o['workers']} prefork children; seed {o['seed']}; {env['cpus']} CPUs; load average "
        f"{'/'.join(str(x) for x in env['load_average_at_start'])} at the start, "
        f"{'/'.join(str(x) for x in env['load_average_at_end'])} at the end (shared machine)."
    )


def summary(document: dict[str, Any]) -> str:
    runs = document["runs"]
    lines = [
        _heading(document),
        "",
        "| measure | " + " | ".join(r["label"] for r in runs) + " |",
        "|---|" + "--:|" * len(runs),
    ]
    for name, cell in ROWS:
        lines.append(f"| {name} | " + " | ".join(cell(r["figures"]) for r in runs) + " |")
    lines.append(
        "| lost / duplicated / not scheduled / left in storage / sent twice | "
        + " | ".join(_oracle_cell(r) for r in runs)
        + " |"
    )
    width = document["options"]["bin_seconds"]
    for r in runs:
        lines += [
            "",
            f"{r['label']}: due -> sent per {width:g} s of due time",
            "",
            "| from s | jobs | p50 ms | p99 ms | max ms |",
            "|--:|--:|--:|--:|--:|",
        ]
        lines += [
            f"| {t['from_s']:g} | {t['jobs']:,} | {t['p50_ms']:.1f} | {t['p99_ms']:.1f} "
            f"| {t['max_ms']:.1f} |"
            for t in r["figures"]["timeline"]
        ]
    return "\n".join(lines)
