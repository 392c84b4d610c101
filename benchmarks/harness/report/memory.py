"""The memory scenario's Markdown summary: per storage, the scheduler process and the plugin
worker with the jobs waiting (the scheduler part); then a worker's own memory with many delayed
calls, plain Celery against the plugin, the plain one extrapolated and labelled as such (the
worker part)."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.harness.report import markdown_table

__all__ = ["summary"]


def summary(document: dict[str, Any]) -> str:
    parts = []
    if document["storages"]:
        parts.append(_scheduler_part(document))
    if document.get("worker_calls"):
        parts.append(_worker_part(document))
    return "\n\n".join(parts)


def _scheduler_part(document: dict[str, Any]) -> str:
    o = document["options"]
    heading = (
        f"Memory with {o['jobs']:,} delayed jobs waiting (due 1-31 days ahead); scheduler process: "
        f"SchedulerService (default settings) via the Celery integration; worker: celery worker "
        f"--parallel-scheduler, 1 prefork child; RSS = largest reading over {o['window']:g} s "
        f"(psutil, worker = main + child); after {o['warmup_passes']} warm-up passes on the empty "
        f"store, and after {o['passes']} passes with the jobs waiting ({o['probes']:,} probe jobs "
        f"released and run in between)."
    )
    rss = []
    for run in document["storages"]:
        f = run["figures"]
        scheme = run["storage_url"].split(":", 1)[0]
        target = "<= 150 MB: " + ("met" if f["scheduler_target_met"] else "MISSED")
        for name, key, note in (
            ("scheduler process", "scheduler_rss_mib", target),
            ("worker with the plugin (--parallel-scheduler)", "worker_rss_mib", "-"),
        ):
            m = f[key]
            rss.append(
                (scheme, name, m["after_warmup_empty_store"], m["after_passes_with_jobs_waiting"],
                 f"{m['growth']:+}", m["peak"], note)
            )  # fmt: skip
    passes = []
    for run in document["storages"]:
        f = run["figures"]
        nothing_due = f["pass_ms_nothing_due_with_jobs_waiting"]
        passes.append(
            (run["storage_url"].split(":", 1)[0], f"{f['store_jobs_per_s']:,}",
             f"{nothing_due['p50']} / {nothing_due['max']}",
             json.dumps(f["storage_footprint_after"]))
        )  # fmt: skip
    columns = ("storage", "process", "empty store, MiB", "jobs waiting, MiB", "growth", "peak")
    rss_table = markdown_table((*columns, "target"), rss, "llrrrrl")
    passes_table = markdown_table(
        ("storage", "stored jobs/s", "pass ms, nothing due (p50 / max)", "footprint"),
        passes,
        "lrrl",
    )
    return "\n".join([heading, "", rss_table, "", passes_table])


def _settled(seconds: float | None) -> str:
    return "not within --timeout" if seconds is None else f"{seconds:.1f} s"


def _worker_part(document: dict[str, Any]) -> str:
    calls = document["worker_calls"]
    runs = [run["figures"] for run in calls["runs"]]
    heading = (
        f"A worker's own memory with delayed calls waiting: apply_async(countdown="
        f"{calls['countdown_seconds']}), broker `{calls['broker']}`, a pool of "
        f"{calls['worker_concurrency']}; the plugin with eta_threshold "
        f"{calls['eta_threshold_seconds']} s, "
        f"storage `{calls['storage_url']}`. RSS = main process + pool children, the largest "
        f"reading over {document['options']['window']:g} s."
    )
    table = markdown_table(
        ("scenario", "delayed calls", "worker RSS before", "after", "peak", "growth",
         "growth per call", "caller calls/s", "received by worker", "in broker queue",
         "in storage", "settled after"),
        [
            (r["scenario"], f"{r['jobs']:,}", f"{r['rss_before_mib']:.1f} MiB",
             f"{r['rss_after_mib']:.1f} MiB", f"{r['rss_peak_mib']:.1f} MiB",
             f"{r['growth_mib']:+.1f} MiB", f"{r['growth_bytes_per_job']:,.0f} B",
             f"{r['calls_per_second']:,}", f"{r['worker_received']:,}",
             f"{r['broker_queue_after']:,}", f"{r['stored']:,}", _settled(r["settle_seconds"]))
            for r in runs
        ],
        "lrrrrrrrrrrr",
    )  # fmt: skip
    lines = [heading, "", table]
    plain = [r for r in runs if "extrapolated_rss_mib_at_1m" in r]
    if plain:
        p = plain[0]
        lines += [
            "",
            f"Plain Celery at 1,000,000 waiting calls, **extrapolated** (linear, from "
            f"{p['growth_bytes_per_job']:,.0f} B per call measured at {p['jobs']:,}; not "
            f"measured): {p['extrapolated_rss_mib_at_1m']:,.0f} MiB "
            f"(+{p['extrapolated_growth_gib_at_1m']} GiB).",
        ]
    return "\n".join(lines)
