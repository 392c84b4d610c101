"""The memory scenario's Markdown summary: scheduler and plugin worker RSS per storage, then the
plain Celery worker measured and extrapolated (labelled as such)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["summary"]


def summary(document: dict[str, Any]) -> str:
    o = document["options"]
    lines = [
        f"Memory with {o['jobs']:,} delayed jobs waiting (due 1-31 days ahead); scheduler process: "
        f"SchedulerService (default settings) via the Celery integration; worker: celery worker "
        f"--parallel-scheduler, 1 prefork child; RSS = largest reading over {o['window']:g} s "
        f"(psutil, worker = main + child); after {o['warmup_passes']} warm-up passes on the empty "
        f"store, and after {o['passes']} passes with the jobs waiting ({o['probes']:,} probe jobs "
        f"released and run in between).",
        "",
        "| storage | process | empty store, MiB | jobs waiting, MiB | growth | peak | target |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for run in document["storages"]:
        f = run["figures"]
        scheme = run["storage_url"].split(":", 1)[0]
        target = "<= 150 MB: " + ("met" if f["scheduler_target_met"] else "MISSED")
        for name, key, note in (
            ("scheduler process", "scheduler_rss_mib", target),
            ("worker with the plugin (--parallel-scheduler)", "worker_rss_mib", "-"),
        ):
            m = f[key]
            lines.append(
                f"| {scheme} | {name} | {m['after_warmup_empty_store']} | "
                f"{m['after_passes_with_jobs_waiting']} | {m['growth']:+} | {m['peak']} | {note} |"
            )
    lines += ["", "| storage | stored jobs/s | pass ms, nothing due (p50 / max) | footprint |"]
    lines += ["|---|--:|--:|---|"]
    for run in document["storages"]:
        f = run["figures"]
        passes = f["pass_ms_nothing_due_with_jobs_waiting"]
        lines.append(
            f"| {run['storage_url'].split(':', 1)[0]} | {f['store_jobs_per_s']:,} | "
            f"{passes['p50']} / {passes['max']} | {json.dumps(f['storage_footprint_after'])} |"
        )
    plain = document.get("plain_celery")
    if plain is not None:
        p = plain["figures"]
        lines += [
            "",
            "| plain Celery worker (countdown=3600) | calls | RSS before, MiB | after, MiB "
            "| growth per call | at 1,000,000 calls |",
            "|---|--:|--:|--:|--:|--:|",
            f"| measured | {p['jobs']:,} | {p['rss_before_mib']} | {p['rss_after_mib']} | "
            f"{p['growth_bytes_per_job']:,.0f} B | **extrapolated** (linear): "
            f"{p['extrapolated_rss_mib_at_1m']:,.0f} MiB (+{p['extrapolated_growth_gib_at_1m']} "
            "GiB) |",
        ]
    return "\n".join(lines)
