"""Crash and stall bounds: the lock holder SIGKILLed or SIGSTOPped mid-release, per release path,
with every job counted. A count, not a speed figure. Its verdict (``verdict``: nothing lost, no
more duplicated than the path's bound, no "sent after its claim expired", at most one send per
thread after SIGCONT) is also a slow test at a small size: ``tests/faults/
test_crash_bound_verdicts.py`` (the paths ``tests/faults`` did not already bound).

    .venv/bin/python -m benchmarks.crash_bounds       # 10,000 jobs (50,000 on the fast paths)
    .venv/bin/python -m benchmarks.crash_bounds --jobs 1000 --paths batch --faults SIGSTOP

For each release path and each fault it starts two real scheduler processes
(``devtools.scheduler_process``) with the project's default settings unless given, then stores
``--jobs`` jobs (``--fast-jobs`` on the two fast paths, which would otherwise be done before the
fault lands) all due ``--lead`` seconds after storing began, so both processes run before any
job is due, and strikes the lock holder once ``--strike-at`` of the jobs went out:

* ``SIGKILL``: the other process takes the lock over and releases everything;
* ``SIGSTOP``: the other process takes over and releases everything, then the frozen one gets
  ``SIGCONT`` and its pass runs to its end (the stall a GC pause or a swapped-out host causes).

Then it counts: **lost** (stored, never sent), **duplicated** (sends beyond the first), what the
stalled process sent after ``SIGCONT``, and how many "was sent after its claim expired" warnings
it logged. The paths: ``per_job`` and ``batch`` through a recording dispatcher that takes
``--dispatch-delay`` per job (a broker round trip); ``fast_publish`` (``batch``, PostgreSQL
storage, a Redis broker, one atomic push per chunk); ``one_script`` (``batch``, Redis storage and
broker on one server, jobs carrying their messages: pushed and marked in one script). The bound
printed beside each row is ``max_degree_of_parallelism`` jobs for ``per_job``,
``min(batch_size, max_degree_of_parallelism * chunk)`` for the chunked paths (``CHUNK``, or on
PostgreSQL ``TRANSACTION_CHUNK``: ``delayed_scheduler.chunk_for``), 0 for one script.

It starts its own PostgreSQL and Redis (``devtools.servers``, the throwaway servers' launcher:
installed binaries, free ports, temporary directories) and never touches a shared server. Each
row is printed as JSON when it is done; at the end the table, the command, the commit and the
load average, then any failed verdict (exit status 1). ``--out`` (JSON: options, environment,
rows, failures) is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import storage_adapters
from benchmarks.harness.report import (
    environment,
    git_commit,
    load_average,
    markdown_table,
    options,
    refuse_existing,
    write_once,
)
from devtools.broker_messages import QUEUE, fast_publisher, pushed_count, pushed_ids
from devtools.scheduler_process import SchedulerProcess, lock_holder_process, read_dispatches
from devtools.servers import PostgresServer, RedisServer, new_workdir
from devtools.waiting import wait_until
from parallel_scheduler import Settings
from parallel_scheduler.delayed.paths import CHUNK, TRANSACTION_CHUNK
from storage_adapters import JobState, NewJob, Storage

LATE_WARNING = "was sent after its claim expired"
IN_TIME_WARNING = "whose send started while their claim was valid"
FAULTS = ("SIGKILL", "SIGSTOP")


@dataclass(frozen=True)
class ReleasePath:
    name: str
    storage: str  # postgresql | redis
    release_mode: str
    broker: bool  # send through the fast publish path to the Redis broker
    envelopes: bool  # jobs carry their broker message: the one-script release


PATHS = {
    "per_job": ReleasePath("per_job", "postgresql", "per_job", broker=False, envelopes=False),
    "batch": ReleasePath("batch", "postgresql", "batch", broker=False, envelopes=False),
    "fast_publish": ReleasePath(
        "fast_publish", "postgresql", "batch", broker=True, envelopes=False
    ),
    "one_script": ReleasePath("one_script", "redis", "batch", broker=True, envelopes=True),
}


def bound(path: ReleasePath, ns: argparse.Namespace) -> int:
    if path.envelopes:
        return 0
    if path.release_mode == "per_job":
        return int(ns.parallelism)
    chunk = TRANSACTION_CHUNK if path.storage == "postgresql" else CHUNK  # chunk_for(storage)
    return min(int(ns.batch_size), int(ns.parallelism) * chunk)


def store(
    storage: Storage, ids: list[str], broker_url: str | None, envelopes: bool, due: float
) -> None:
    maker = fast_publisher(broker_url) if envelopes and broker_url else None
    for first in range(0, len(ids), 5000):
        page = [NewJob(i, "faults.record", "{}", due) for i in ids[first : first + 5000]]
        if maker is not None:
            page = [NewJob(j.id, j.task, j.payload, j.due_at, maker.envelope(j)) for j in page]
        storage.add_jobs(page)


def store_when_ready(
    storage: Storage,
    processes: list[SchedulerProcess],
    ids: list[str],
    broker_url: str | None,
    envelopes: bool,
    lead: float,
) -> None:
    """Once both processes run, the jobs, all due ``lead`` s from now: so the fast paths
    cannot have released most of them while the second process was still starting."""
    for process in processes:
        process.wait_ready()
    due_at = storage.now() + lead
    store(storage, ids, broker_url, envelopes, due_at)
    if storage.now() >= due_at:
        raise RuntimeError(f"storing {len(ids):,} jobs took more than --lead {lead} s")


def settle(count: Callable[[], int], target: int, quiet_for: float) -> int:
    """``count()`` once it reaches ``target``, or once it has not changed for ``quiet_for`` s."""
    last, changed_at = count(), time.monotonic()
    while last < target and time.monotonic() - changed_at < quiet_for:
        time.sleep(0.2)
        now = count()
        if now != last:
            last, changed_at = now, time.monotonic()
    return last


def start_processes(
    path: ReleasePath,
    ns: argparse.Namespace,
    workdir: Path,
    storage_url: str,
    prefix: str,
    broker_url: str | None,
) -> list[SchedulerProcess]:
    settings: dict[str, Any] = {
        "release_mode": path.release_mode, "batch_size": ns.batch_size,
        "parallelism": ns.parallelism, "poll_interval": ns.poll_interval,
        "lock_lease": ns.lock_lease, "dispatch_delay": 0 if path.broker else ns.dispatch_delay,
    }  # fmt: skip
    if broker_url:
        settings["broker_url"] = broker_url
    return [
        SchedulerProcess(workdir, name, storage_url, [prefix], **settings)
        for name in ("first", "second")
    ]


def run_one(
    path: ReleasePath,
    fault: str,
    ns: argparse.Namespace,
    pg: PostgresServer,
    redis: RedisServer,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """One path under one fault: the row of the table (``ns``: the command's options)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ps-crash-bounds-"))
    storage_url = pg.url if path.storage == "postgresql" else redis.url_for_db(0)
    broker_url = redis.url_for_db(1) if path.broker else None
    if broker_url:
        import redis as redis_client

        redis_client.Redis.from_url(broker_url).delete(QUEUE)
    prefix = f"crash_{uuid.uuid4().hex[:10]}"
    storage = storage_adapters.from_url(storage_url, prefix=prefix, pool_size=4)
    storage.setup()
    jobs = ns.fast_jobs if path.broker else ns.jobs
    ids = [f"crash-{i}" for i in range(jobs)]
    processes = start_processes(path, ns, workdir, storage_url, prefix, broker_url)
    records = [p.record for p in processes]

    def sent_count() -> int:
        return pushed_count(broker_url) if broker_url else len(read_dispatches(records))

    row: dict[str, Any] = {"path": path.name, "fault": fault, "jobs": jobs}
    try:
        store_when_ready(storage, processes, ids, broker_url, path.envelopes, ns.lead)
        wait_until(lambda: sent_count() >= ns.strike_at * jobs, timeout=300, interval=0.005)
        victim = lock_holder_process(storage, processes)
        row["mid_pass"] = victim is not None
        victim = victim or processes[0]
        other = processes[1] if victim is processes[0] else processes[0]
        struck_at = time.monotonic()
        victim.send(signal.SIGKILL if fault == "SIGKILL" else signal.SIGSTOP)
        if fault == "SIGKILL":
            victim.wait(timeout=30)
        row["sent_before_fault"] = sent_count()
        row["claimed_at_fault"] = storage.count_by_state()[JobState.CLAIMED]
        row["takeover_s"] = None  # not seen when nothing was left for the other to release
        if row["sent_before_fault"] < jobs:
            wait_until(
                lambda: lock_holder_process(storage, processes) is other,
                timeout=ns.lock_lease + 60,
                interval=0.01,
            )
            row["takeover_s"] = round(time.monotonic() - struck_at, 2)

        def enqueued() -> int:
            return storage.count_by_state()[JobState.ENQUEUED]

        resumed_at = time.time()
        if fault == "SIGSTOP":
            # The other process releases what it can while this one is frozen. Rows the frozen
            # process holds in an open storage transaction wait for it to resume (or die): so
            # wait until everything went, or nothing has moved for two leases, then resume it.
            row["waiting_for_the_stalled"] = jobs - settle(enqueued, jobs, 2 * ns.lock_lease + 5)
            victim.send(signal.SIGCONT)
            resumed_at = time.time()
            row["stalled_s"] = round(time.monotonic() - struck_at, 1)
        if settle(enqueued, jobs, ns.lock_lease * 3 + 60) < jobs:
            states = {k.value: v for k, v in storage.count_by_state().items() if v}
            holder = storage.lock_holder("delayed-scheduler")
            raise RuntimeError(
                f"{path.name}/{fault}: not every job was released: {states}; lock {holder}; "
                f"logs in {workdir}"
            )
        if fault == "SIGSTOP":
            try:
                wait_until(lambda: "pass released" in victim.log(), timeout=30, interval=0.1)
            except AssertionError:
                row["note"] = "the resumed process logged no end of pass within 30 s"
        row.update(count(ids, broker_url, records, victim, fault, resumed_at))
        row["bound"] = bound(path, ns)
    finally:
        for process in processes:
            process.end(grace=20)
        storage.drop()
        storage.close()
    print(json.dumps(row), flush=True)
    return row


def count(
    ids: list[str],
    broker_url: str | None,
    records: list[Path],
    victim: SchedulerProcess,
    fault: str,
    resumed_at: float,
) -> dict[str, Any]:
    """Lost and duplicated jobs, what the stalled process sent after SIGCONT, its warnings."""
    dispatches = read_dispatches(records)
    seen = pushed_ids(broker_url) if broker_url else [d.job_id for d in dispatches]
    counts = Counter(seen)
    after = [d for d in dispatches if d.by == victim.name and d.at > resumed_at]
    log = victim.log()
    return {
        "lost": len(set(ids) - set(counts)),
        "duplicated": sum(n - 1 for n in counts.values()),
        "sent_after_sigcont": len(after) if fault == "SIGSTOP" and not broker_url else None,
        "late_send_warnings": log.count(LATE_WARNING),
        "in_time_warnings": log.count(IN_TIME_WARNING),
    }


def verdict(row: dict[str, Any], parallelism: int) -> list[tuple[str, Any]]:
    """What one row broke, as (what, found): nothing lost; no more duplicated than the path's
    bound; no "was sent after its claim expired" (kept for sends that really started late);
    after SIGCONT, at most the sends under way at the freeze (one per thread)."""
    where = f"{row['path']}/{row['fault']}"
    failures: list[tuple[str, Any]] = []
    if row["lost"] != 0:
        failures.append((f"{where}: lost 0", row["lost"]))
    if row["duplicated"] > row["bound"]:
        failures.append((f"{where}: duplicated <= bound {row['bound']}", row["duplicated"]))
    if row["late_send_warnings"] != 0:
        failures.append((f"{where}: no '{LATE_WARNING}' logged", row["late_send_warnings"]))
    after = row.get("sent_after_sigcont")
    if after is not None and after > parallelism:
        failures.append((f"{where}: sent after SIGCONT <= {parallelism} (one per thread)", after))
    return failures


def table(rows: list[dict[str, Any]]) -> str:
    columns = (
        "path", "fault", "jobs", "claimed at the fault", "take-over (s)", "lost", "duplicated",
        "bound", "waiting for the stalled process", "sent after SIGCONT",
        "'sent after its claim expired' logged",
    )  # fmt: skip
    cells = []
    for r in rows:
        after = r.get("sent_after_sigcont")
        cells.append(
            (r["path"], r["fault"], f"{r['jobs']:,}", f"{r['claimed_at_fault']:,}",
             r["takeover_s"] or "-", r["lost"], f"{r['duplicated']:,}", f"{r['bound']:,}",
             r.get("waiting_for_the_stalled", "-"), "-" if after is None else after,
             r["late_send_warnings"])
        )  # fmt: skip
    return markdown_table(columns, cells, "llrrrrrrrrr")


def main(argv: list[str]) -> int:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="crash_bounds", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--fast-jobs", type=int, default=50_000)
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=list(PATHS))
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--parallelism", type=int, default=defaults.max_degree_of_parallelism)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--poll-interval", type=float, default=defaults.poll_interval)
    parser.add_argument("--lock-lease", type=float, default=defaults.lock_lease)
    parser.add_argument("--dispatch-delay", type=float, default=0.001)
    parser.add_argument(
        "--strike-at", type=float, default=0.37, help="share of jobs sent first (mid-batch)"
    )
    parser.add_argument(
        "--lead", type=float, default=10.0, help="seconds from storing the jobs to their due time"
    )
    parser.add_argument("--out", type=Path, help="JSON results (never overwritten)")
    ns = parser.parse_args(argv)
    refuse_existing(parser, ns.out)
    env = environment()
    pg = PostgresServer(new_workdir("crash-pg"))
    redis = RedisServer(new_workdir("crash-redis"))
    rows: list[dict[str, Any]] = []
    try:
        pg.start()
        redis.start()
        rows.extend(
            run_one(PATHS[name], fault, ns, pg, redis) for name in ns.paths for fault in ns.faults
        )
    finally:
        pg.close()
        redis.close()
    failures = [f for row in rows for f in verdict(row, ns.parallelism)]
    env["load_average_at_end"] = load_average()
    print()
    print(table(rows))
    print(
        f"\ncommand: .venv/bin/python -m benchmarks.crash_bounds {' '.join(argv)}".rstrip()
        + f"\ncommit: {git_commit()}; chunk {CHUNK} ({TRANSACTION_CHUNK} on PostgreSQL); "
        f"parallelism {ns.parallelism}, batch "
        f"{ns.batch_size}, lease {ns.lock_lease} s, poll {ns.poll_interval} s, dispatch delay "
        f"{ns.dispatch_delay} s (recording dispatcher)\nload average at start "
        f"{env['load_average_at_start']}, at end {env['load_average_at_end']}"
    )
    for what, found in failures:
        print(f"crash_bounds: FAILED {what}: {found}", file=sys.stderr)
    document = {
        "benchmark": "crash_bounds",
        "passed": not failures,
        "options": options(ns),
        "environment": env,
        "rows": rows,
        "failures": failures,
    }
    write_once(ns.out, document)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
