"""Paths vs limits: the project's release and accept paths beside the hardware's raw limits,
measured interleaved in one run, each path printed as a ratio to its limit.

    .venv/bin/python -m benchmarks.limits --out limits.json
    .venv/bin/python -m benchmarks.limits --only redis-release accept-pg-bulk --jobs 50000

Groups (``--only`` takes group names, or ``group/item`` for one item; a path brings its limits):

- ``redis-release``: raw Lua ZSET+HASH -> LIST vs the one-script release, batch + fast publish,
  the defaults and per_job + send_task (Redis storage and broker list on one server);
- ``pg-release``: raw set-based ``UPDATE … SKIP LOCKED RETURNING`` + one ``LPUSH`` per batch vs
  the defaults and batch + fast publish (PostgreSQL storage, Redis broker);
- ``accept-pg-single``/``accept-pg-bulk``/``accept-redis-single``/``accept-redis-bulk``:
  ``Client.schedule`` per job and ``schedule_many`` (1,000 per call, also with accept-time
  messages on Redis) vs raw INSERT + commit per job, ``executemany`` and ``COPY``, one
  ``EVALSHA`` per job and a raw Lua accept of 1,000 jobs per script;
- ``rabbitmq-release``: batch + ``AmqpPublisher`` (transaction, confirms) vs a raw py-amqp
  publish of the same persistent messages under the same guarantee (Redis storage).

"The defaults" are ``Settings()`` as they are at run time, wired as the Celery integration
wires them. Every run is checked before its figure is kept (each job once in the broker, nothing
left Scheduled or Claimed; accepted: every job stored Scheduled); a failed check is reported,
its item marked unverified, and the command exits 1. Warm-ups (``--warmup`` rounds of at most
5,000 jobs) are checked and discarded; then ``--repetitions`` rounds each run every item once,
so background load falls on paths and limits alike. The seed fixes ids and payloads (a hex token
of ``--token-chars``); every run's prefix, keys and queue are deleted. The JSON (``--out``,
never overwritten) records the command, the commit, versions and the load average per round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness.limit_items import ITEMS, Item, Run
from benchmarks.harness.options import add_rounds, parse_checked
from benchmarks.harness.report import conclude, environment, load_average, options
from benchmarks.harness.report.provenance import provenance_line
from parallel_scheduler import Settings


@dataclass
class Record:
    item: Item
    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates and not self.failures else None


def selected(only: list[str] | None) -> list[Item]:
    """The items ``--only`` names (a group, or ``group/item``), with the limits their paths use."""
    if not only:
        return list(ITEMS)
    if unknown := set(only) - {i.group for i in ITEMS} - {i.key for i in ITEMS}:
        raise ValueError(f"unknown in --only: {sorted(unknown)}")
    wanted = {f"{i.group}/{i.name}" for i in ITEMS if i.group in only or i.key in only}
    for item in ITEMS:
        if item.key in wanted:
            wanted |= {f"{item.group}/{limit}" for limit, _ in item.compare}
    return [i for i in ITEMS if i.key in wanted]


def run_item(args: argparse.Namespace, record: Record, jobs: int, seed: int, keep: bool) -> None:
    """One checked run; its figure kept only when ``keep`` (not a warm-up) and the check passed."""
    try:
        rate, cpu = record.item.run(Run(args, jobs, seed))
    except Exception as exc:  # a failed check, or a server that failed mid-run: reported
        record.failures.append(f"{type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
        print(f"  {record.item.key}: FAILED {exc}", flush=True)
        return
    if keep:
        record.rates.append(rate)
        record.cpu.append(cpu)
    print(f"  {record.item.key}: {rate:,.0f} jobs/s, {cpu:,.0f} ms CPU per 1,000", flush=True)


def measure(args: argparse.Namespace, items: list[Item]) -> tuple[dict[str, Record], list[Any]]:
    records = {item.key: Record(item) for item in items}
    rounds: list[Any] = []
    plan = [("warm-up", w, False) for w in range(args.warmup)]
    plan += [("round", r, True) for r in range(args.repetitions)]
    for label, number, keep in plan:
        print(f"{label} {number + 1}", flush=True)
        before, started = load_average(), time.time()
        for item in items:
            jobs = min(args.jobs, item.max_jobs(args))
            if not keep:
                jobs = min(jobs, 5000)
            seed = args.seed + number + (0 if keep else 10_000)
            run_item(args, records[item.key], jobs, seed, keep)
        rounds.append(
            {
                "round": f"{label} {number + 1}",
                "load_before": before,
                "load_after": load_average(),
                "seconds": round(time.time() - started, 1),
            }
        )
    return records, rounds


def verdict(ratio: float | None, target: float | None) -> str:
    if ratio is None:
        return "unverified"
    if target is None:
        return "-"
    return "met" if ratio >= target else "not met"


def summarise(records: dict[str, Record]) -> dict[str, Any]:
    """Per group: each item's figures, and each path's ratio to each of its limits."""
    groups: dict[str, Any] = {}
    for record in records.values():
        item = record.item
        group = groups.setdefault(item.group, {"items": {}, "comparisons": []})
        median = record.median()
        cpu = statistics.median(record.cpu) if record.cpu else None
        group["items"][item.name] = {
            "kind": item.kind,
            "verified": not record.failures and bool(record.rates),
            "jobs_per_s": record.rates,
            "median_jobs_per_s": median,
            "cpu_ms_per_1000": record.cpu,
            "median_cpu_ms_per_1000": cpu,
            "failures": record.failures,
        }
        if item.floor is not None:
            met = "unverified" if median is None else verdict(median / item.floor, 1.0)
            group["comparisons"].append(
                {
                    "path": item.name,
                    "limit": None,
                    "ratio": None,
                    "target": f">= {item.floor:,.0f}/s",
                    "met": met,
                }
            )
        for limit, target in item.compare:
            limit_median = records[f"{item.group}/{limit}"].median()
            ratio = median / limit_median if median and limit_median else None
            group["comparisons"].append(
                {
                    "path": item.name,
                    "limit": limit,
                    "ratio": ratio,
                    "target": None if target is None else f">= {target:.0%} of the limit",
                    "met": verdict(ratio, target),
                }
            )
    return groups


#: the settings that decide how "the defaults" release
_RELEASE_SETTINGS = ("release_mode", "fast_publish", "batch_size", "max_degree_of_parallelism")


def _rate(row: dict[str, Any]) -> str:
    rates = row["jobs_per_s"]
    if row["median_jobs_per_s"] is None:
        return "unverified"
    return f"{row['median_jobs_per_s']:,.0f} ({min(rates):,.0f} to {max(rates):,.0f})"


def table(document: dict[str, Any]) -> str:
    lines: list[str] = []
    for name, group in document["groups"].items():
        items = group["items"]
        lines += [
            f"\n{name} ({document['config']['jobs']:,} jobs)",
            "",
            "| path | jobs/s median (min to max) | limit | limit jobs/s | path/limit "
            "| CPU ms / 1,000 jobs | target | |",
            "|---|--:|---|--:|--:|--:|---|---|",
        ]
        for row_name, row in items.items():
            if row["kind"] == "limit":
                cpu = row["median_cpu_ms_per_1000"]
                lines.append(
                    f"| *{row_name}* (limit) | {_rate(row)} | | | | "
                    f"{'-' if cpu is None else f'{cpu:,.0f}'} | | |"
                )
        for c in group["comparisons"]:
            row = items[c["path"]]
            cpu = row["median_cpu_ms_per_1000"]
            limit = items[c["limit"]] if c["limit"] else None
            ratio = "-" if c["ratio"] is None else f"{c['ratio']:.0%}"
            lines.append(
                f"| {c['path']} | {_rate(row)} | {c['limit'] or '(absolute target)'} | "
                f"{_rate(limit) if limit else '-'} | {ratio} | "
                f"{'-' if cpu is None else f'{cpu:,.0f}'} | {c['target'] or '-'} | {c['met']} |"
            )
    defaults = document["settings_defaults"]
    lines.append(
        "\nthe defaults: "
        + ", ".join(f"{k}={defaults[k]}" for k in _RELEASE_SETTINGS if k in defaults)
    )
    lines.append(provenance_line(document))
    return "\n".join(lines)


def _relative(path: str) -> str:
    """``.venv/bin/python`` rather than the machine's absolute path, when it is under here."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per run")
    parser.add_argument(
        "--single-jobs",
        type=int,
        default=5_000,
        help="jobs per run of the one-call-per-job accepts (at most --jobs)",
    )
    parser.add_argument(
        "--token-chars",
        type=int,
        default=540,
        help="hex token per job: a stored payload of about 600 bytes",
    )
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4, help="scheduler pool threads")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--postgresql-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--only", nargs="*", help="groups or group/item (default: all)")
    add_rounds(parser)
    args = parse_checked(parser, argv, redis_broker=False)
    if min(args.jobs, args.single_jobs, args.repetitions, args.batch_size) < 1:
        parser.error("--jobs, --single-jobs, --repetitions and --batch-size must be >= 1")
    try:
        items = selected(args.only)
    except ValueError as exc:
        parser.error(f"{exc}; groups: {sorted({i.group for i in ITEMS})}")
    document: dict[str, Any] = {
        "command": " ".join([_relative(sys.executable), *sys.argv]),
        "environment": environment(args.redis_url),
        "config": options(args),
        # what "the defaults" were in this run: they change between releases
        "settings_defaults": Settings().describe(),
    }
    records, document["rounds"] = measure(args, items)
    document["load_average_at_end"] = load_average()
    document["groups"] = summarise(records)
    failures = [(key, r.failures) for key, r in records.items() if r.failures]
    return conclude("limits", document, failures, table, args.out)


if __name__ == "__main__":
    sys.exit(main())
