"""Retention under load: does purging a million finished jobs slow the releases down, and does the
storage shrink back?

One run, on one storage server (``--storage-url``), under a fresh prefix:

1. **empty**: a steady stream of due jobs (``--rate`` a second for ``--duration`` s) released by a
   ``DelayedJobScheduler`` (the product's pass loop, ``run_forever``) with ``--retention``; its
   dispatcher only records when each job was handed over, on the storage clock (no broker: the
   figure is the scheduler's, not a worker's). Pass time (passes that released jobs) and release
   lateness (due -> handed over) are the baseline;
2. ``--jobs`` finished (Enqueued) jobs are stored through the public path (add, claim, mark),
   then (PostgreSQL) vacuumed as autovacuum would have done over the days such a backlog takes
   to build (``settle_fill``), and left to age past ``--retention``;
3. **full**: the same stream again, while the scheduler's purger (its own thread and lock,
   short slices, a bounded share of the server's time: ``parallel_scheduler/delayed/retention.py``)
   deletes the backlog beside the passes; the same figures, then the scheduler keeps running
   until the backlog is gone (``--drain-timeout``) and how long that took;
4. storage size at the start, full, and after the purge (PostgreSQL ``pg_total_relation_size`` of
   the jobs table with its indexes, Redis ``INFO memory`` ``used_memory``: a server-wide figure,
   so run it on a quiet server). PostgreSQL keeps a table's pages after a DELETE for reuse
   (autovacuum marks them free; only ``VACUUM FULL`` hands them back), so its size is reported
   after a plain ``VACUUM`` too, and the live row count beside it.

The verdict: full/empty of p50 and p99 pass time and p99 lateness each within ``--tolerance``
(10 %), and the size after the purge within ``--tolerance`` of the start (Redis). ``--out``
(JSON) is never overwritten. The full size is 1,000,000 jobs; smoke-run it small:

    .venv/bin/python -m benchmarks.purge --storage-url redis://127.0.0.1:6379/0 --jobs 2000
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import storage_adapters
from benchmarks.harness.report import conclude, environment, ms_summary, options, refuse_existing
from parallel_scheduler import CallableDispatcher, Client, DelayedJobScheduler, JobSpec, Settings
from parallel_scheduler.clock import StorageClock
from parallel_scheduler.engine.stats import PassStats
from storage_adapters import JobState, NewJob, Storage
from storage_adapters.redis.storage import RedisStorage
from storage_adapters.sql.storage import SQLStorage

FILL_PAGE = 5000


class MeasuredScheduler(DelayedJobScheduler):
    """The product's scheduler, keeping every pass's stats."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passes: list[PassStats] = []

    def run_once(self) -> PassStats:
        stats = super().run_once()
        self.passes.append(stats)
        return stats


def storage_size(storage: Storage) -> dict[str, Any]:
    if isinstance(storage, RedisStorage):
        with storage._talking() as client:
            return {"redis_used_memory": int(client.info("memory")["used_memory"])}
    assert isinstance(storage, SQLStorage)
    jobs = storage._tables.jobs.name
    with storage._engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT count(*) FROM {jobs}")).scalar()
        if storage._dialect.name != "postgresql":
            return {"rows": rows}
        size = conn.execute(sa.text(f"SELECT pg_total_relation_size('{jobs}')")).scalar()
    return {"rows": rows, "pg_total_relation_size": size}


def vacuumed_size(storage: Storage) -> int | None:
    if not isinstance(storage, SQLStorage) or storage._dialect.name != "postgresql":
        return None
    jobs = storage._tables.jobs.name
    with storage._engine.connect() as conn:
        conn.execute(sa.text(f"VACUUM {jobs}"))
        return int(conn.execute(sa.text(f"SELECT pg_total_relation_size('{jobs}')")).scalar())


def fill_finished(storage: Storage, count: int) -> None:
    """``count`` Enqueued jobs, through add -> claim -> mark as a release would leave them."""
    lock = storage.acquire_lock("bench-fill", "bench", 600)
    assert lock is not None
    for start in range(0, count, FILL_PAGE):
        now = storage.now()
        page = range(start, min(count, start + FILL_PAGE))
        storage.add_jobs([NewJob(f"old-{i}", "bench.noop", "{}", now - 3600) for i in page])
        claims = storage.claim_due(len(page), lock, 600)
        storage.mark_enqueued(claims)
        print(f"\rfilled {start + len(page):,} / {count:,}", end="", file=sys.stderr)
    print(file=sys.stderr)
    storage.release_lock(lock)


def settle_fill(storage: Storage) -> None:
    """PostgreSQL: VACUUM ANALYZE the table the fill just wrote. The fill inserts and updates
    1,000,000 rows twice within two minutes, leaving 2,000,000 dead row versions; autovacuum
    then works through 800 MB during the full phase, on the same two cores, and the figures
    would measure that rather than the purge. Finished jobs that accumulated over days, as in
    production, have long been vacuumed: so are these, before the full phase starts."""
    if not isinstance(storage, SQLStorage) or storage._dialect.name != "postgresql":
        return
    jobs = storage._tables.jobs.name
    with storage._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM (ANALYZE) {jobs}"))


def autovacuums(storage: Storage) -> dict[str, int] | None:
    """PostgreSQL's count of autovacuum and autoanalyze runs on the jobs table (``None``
    elsewhere): a run during the full phase is load the figures include."""
    if not isinstance(storage, SQLStorage) or storage._dialect.name != "postgresql":
        return None
    jobs = storage._tables.jobs.name
    with storage._engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT autovacuum_count, autoanalyze_count FROM pg_stat_user_tables "
                "WHERE relname = :name"
            ),
            {"name": jobs},
        ).one()
    return {"autovacuum": int(row[0]), "autoanalyze": int(row[1])}


def stream(storage: Storage, ns: argparse.Namespace, label: str) -> dict[str, Any]:
    """Schedule the stream, run the scheduler through it, and measure; the scheduler is returned
    running (in ``figures['_scheduler']``) so the full phase can let it drain the backlog."""
    clock = StorageClock(storage)
    clock.sync()
    sent: dict[str, float] = {}
    guard = threading.Lock()

    def record(task: str, args: Any, kwargs: Any, opts: Any, job_id: str) -> None:
        with guard:
            sent[job_id] = clock.now()

    total = int(ns.rate * ns.duration)
    first = storage.now() + ns.lead
    due = {f"{label}-{i}": first + i / ns.rate for i in range(total)}
    client = Client(storage)
    specs = [JobSpec("bench.noop", id=job_id, eta=at) for job_id, at in due.items()]
    for start in range(0, total, FILL_PAGE):
        client.schedule_many(specs[start : start + FILL_PAGE])
    settings = Settings(retention=ns.retention, batch_size=ns.batch_size, poll_interval=0.1)
    scheduler = MeasuredScheduler(storage, CallableDispatcher(record), settings)
    thread = threading.Thread(
        target=scheduler.run_forever, kwargs={"install_signal_handlers": False}, daemon=True
    )
    thread.start()
    deadline = first + ns.duration + ns.timeout
    while len(sent) < total and storage.now() < deadline:
        time.sleep(0.2)
    releasing = [p.duration for p in scheduler.passes if p.released]
    return {
        "jobs": total,
        "released": len(sent),
        "passes": len(scheduler.passes),
        "purged": scheduler.purger.purged,
        "pass_ms": ms_summary(releasing),
        "lateness_ms": ms_summary([sent[j] - due[j] for j in sent]),
        "_scheduler": (scheduler, thread),
    }


def stop(figures: dict[str, Any]) -> None:
    scheduler, thread = figures.pop("_scheduler")
    scheduler.stop()
    thread.join(timeout=60)


def run(ns: argparse.Namespace) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    storage = storage_adapters.from_url(ns.storage_url, prefix=f"bp{uuid.uuid4().hex[:10]}")
    storage.setup()
    finished = [JobState.ENQUEUED, JobState.CANCELLED, JobState.EXPIRED]
    try:
        sizes: dict[str, Any] = {"start": storage_size(storage)}
        empty = stream(storage, ns, "empty")
        stop(empty)
        while storage.purge_finished(finished, storage.now() + 1, 10_000):
            pass  # the empty phase's own jobs, so the full phase starts from the fill alone
        fill_finished(storage, ns.jobs)
        if ns.settle:
            settle_fill(storage)
        sizes["full"] = storage_size(storage)
        time.sleep(ns.retention)  # the fill must be past retention before the full phase
        vacuums = {"before_full": autovacuums(storage)}
        full = stream(storage, ns, "full")
        vacuums["after_full"] = autovacuums(storage)
        drain_began = time.monotonic()
        while storage.count_by_state()[JobState.ENQUEUED] > 0:
            if time.monotonic() - drain_began > ns.drain_timeout:
                break
            time.sleep(2.0)  # count_by_state scans the table: not too often
        drained = time.monotonic() - drain_began
        left = storage.count_by_state()[JobState.ENQUEUED]
        stop(full)
        sizes["after_purge"] = storage_size(storage)
        sizes["after_purge_vacuumed"] = vacuumed_size(storage)
    finally:
        storage.drop()
        storage.close()
    document = {
        "scenario": "purge",
        "environment": environment(),
        "options": options(ns),
        "empty": empty,
        "full": full,
        "drain_seconds": round(drained, 1),
        "left_after_drain": left,
        "sizes": sizes,
        "autovacuums": vacuums,
    }
    return document, verdict(document, ns.tolerance)


def verdict(document: dict[str, Any], tolerance: float) -> list[tuple[str, Any]]:
    empty, full = document["empty"], document["full"]
    failures: list[tuple[str, Any]] = [
        ("every stream job released", phase)
        for phase in (empty, full)
        if phase["released"] != phase["jobs"]
    ]
    if document["left_after_drain"]:
        failures.append(("backlog purged within --drain-timeout", document["left_after_drain"]))
    checks = [("pass_ms", "p50"), ("pass_ms", "p99"), ("lateness_ms", "p99")]
    ratios = {}
    for figure, cut in checks:
        base, loaded = empty[figure][cut], full[figure][cut]
        ratios[f"{figure}.{cut}"] = round(loaded / base, 3) if base else None
        if base and loaded > base * (1 + tolerance):
            failures.append((f"{figure} {cut} within {tolerance:.0%} of empty", (base, loaded)))
    document["ratios_full_over_empty"] = ratios
    start, after = document["sizes"]["start"], document["sizes"]["after_purge"]
    if "redis_used_memory" in start:
        base, now = start["redis_used_memory"], after["redis_used_memory"]
        if now > base * (1 + tolerance):
            failures.append(("Redis memory back to its start", (base, now)))
    elif after["rows"] != start["rows"]:
        failures.append(("rows back to the start", (start["rows"], after["rows"])))
    return failures


def summary(document: dict[str, Any]) -> str:
    lines = [
        f"{'':12}{'pass p50':>10}{'pass p99':>10}{'late p50':>10}{'late p99':>10}{'purged':>9}"
    ]
    for name in ("empty", "full"):
        p = document[name]
        lines.append(
            f"{name:12}{p['pass_ms']['p50']:>10}{p['pass_ms']['p99']:>10}"
            f"{p['lateness_ms']['p50']:>10}{p['lateness_ms']['p99']:>10}{p['purged']:>9}"
        )
    lines.append(f"full/empty: {document['ratios_full_over_empty']} (ms figures above)")
    lines.append(
        f"backlog of {document['options']['jobs']:,} purged in {document['drain_seconds']} s"
    )
    lines.append(f"sizes: {document['sizes']}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storage-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    p.add_argument("--jobs", type=int, default=1_000_000, help="finished jobs to fill")
    p.add_argument("--rate", type=float, default=200.0, help="stream jobs due per second")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of stream per phase")
    p.add_argument("--lead", type=float, default=3.0, help="seconds before the first is due")
    p.add_argument("--retention", type=float, default=2.0, help="the scheduler's retention")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=60.0, help="grace after the last due time")
    p.add_argument("--drain-timeout", type=float, default=3600.0)
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument(
        "--no-settle",
        dest="settle",
        action="store_false",
        help="PostgreSQL: leave the fill unvacuumed (autovacuum then runs during the full phase)",
    )
    p.add_argument("--out", type=Path)
    ns = p.parse_args()
    refuse_existing(p, ns.out)
    if ns.jobs < 1 or ns.rate <= 0 or ns.duration <= 0 or ns.retention <= 0:
        p.error("--jobs, --rate, --duration and --retention must be positive")
    document, failures = run(ns)
    return conclude("purge", document, failures, summary, ns.out)


if __name__ == "__main__":
    sys.exit(main())
