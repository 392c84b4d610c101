"""The batched firing path at a size that spans batches and chunks, on every adapter, against an
oracle that knows nothing of the code under test nor of croniter: ``zoneinfo`` and a matcher of
its own, stepping minute by minute.

Each recurring job is made due at its latest tick (by the oracle) before now; passes of three
racing schedulers then fire every one of them exactly once, with the oracle's tick as the firing's
due time and the oracle's following tick as the next run.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from parallel_scheduler import Client, JobState, Settings
from parallel_scheduler.recurring.firing import FIRE_CHUNK
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from storage_adapters import Storage, list_jobs

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]
# (minute, hour) fields; None is '*'
CRONS = [(None, None), (15, None), (0, 3), (30, None), (45, 23)]
BATCH = 400
COUNT = 3 * BATCH + FIRE_CHUNK // 2  # four batches; chunks that end mid-batch


def cron_text(minute: int | None, hour: int | None) -> str:
    return f"{'*' if minute is None else minute} {'*' if hour is None else hour} * * *"


def matches(moment: datetime, minute: int | None, hour: int | None) -> bool:
    return (minute is None or moment.minute == minute) and (hour is None or moment.hour == hour)


def oracle_ticks(
    minute: int | None, hour: int | None, zone: str, now: float
) -> tuple[float, float]:
    """The latest tick at or before ``now`` and the first after it, stepping whole UTC minutes
    and reading each one's wall clock in ``zone`` (no DST change falls in these windows)."""
    start = datetime.fromtimestamp(now // 60 * 60, timezone.utc)
    local = ZoneInfo(zone)

    def walk(step: int) -> float:
        moment = start if step < 0 else start + timedelta(minutes=1)
        while not matches(moment.astimezone(local), minute, hour):
            moment += timedelta(minutes=step)
        return moment.timestamp()

    return walk(-1), walk(1)


def oracle_ticks_between(
    minute: int | None, hour: int | None, zone: str, first: float, last: float
) -> list[float]:
    """Every tick from ``first`` to ``last`` (both ticks), minute by minute."""
    ticks = [first]
    while ticks[-1] < last:
        ticks.append(oracle_ticks(minute, hour, zone, ticks[-1])[1])
    return ticks


def test_racing_passes_fire_every_due_recurring_job_once_at_the_oracles_tick(
    storage: Storage,
) -> None:
    # Given recurring jobs of several crons and zones, each due at its latest tick
    client = Client(storage)
    kinds = [(cron, zone) for cron in CRONS for zone in ZONES]
    items: list[dict[str, Any]] = [
        {
            "id": f"r{n:04d}",
            "task": "tasks.report",
            "cron": cron_text(*kinds[n % len(kinds)][0]),
            "timezone": kinds[n % len(kinds)][1],
            "args": [n],
        }
        for n in range(COUNT)
    ]
    assert client.recurring.save_many(items) == [True] * COUNT
    now = storage.now()
    expected: dict[str, tuple[float, float]] = {}
    for n, item in enumerate(items):
        (minute, hour), zone = kinds[n % len(kinds)]
        tick, following = oracle_ticks(minute, hour, zone, now)
        expected[item["id"]] = (tick, following)
        assert storage.set_recurring_enabled(item["id"], True, tick)
    # When three schedulers race, each running passes until none finds anything due
    settings = Settings(batch_size=BATCH, max_degree_of_parallelism=4)
    schedulers = [RecurringJobScheduler(storage, settings, owner=f"s{i}") for i in range(3)]
    totals: Counter[str] = Counter()
    guard = threading.Lock()

    def drive(scheduler: RecurringJobScheduler) -> None:
        for _ in range(20):
            stats = scheduler.run_once()
            with guard:
                totals["created"] += stats.created
            if stats.lock_acquired and stats.fetched == 0:
                return

    threads = [threading.Thread(target=drive, args=(s,)) for s in schedulers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    # A tick that came due meanwhile (an every-minute cron crossing a minute) fires too: one
    # last pass fires all that is due by `end`, and the oracle is asked up to then.
    end = storage.now()
    schedulers[0].run_once()
    for scheduler in schedulers:
        scheduler.close()
    # Then each recurring job fired each of its ticks exactly once, the oracle's ticks, and its
    # next run is the oracle's next tick
    firings = list_jobs(storage, state=JobState.SCHEDULED, limit=10 * COUNT)
    assert totals["created"] <= len(firings)  # each one created is there, once (ids are unique)
    fired: dict[str, list[float]] = {item["id"]: [] for item in items}
    for job in firings:
        rid = job.id.split("@")[0]
        assert job.id == firing_id(rid, job.due_at)
        fired[rid].append(job.due_at)
    for n, item in enumerate(items):
        (minute, hour), zone = kinds[n % len(kinds)]
        tick, _ = expected[item["id"]]
        ticks = sorted(fired[item["id"]])
        assert ticks[0] == tick, item["id"]
        assert ticks == oracle_ticks_between(minute, hour, zone, tick, ticks[-1]), item["id"]
        assert oracle_ticks(minute, hour, zone, end)[0] <= ticks[-1], item["id"]  # none missed
        stored = storage.get_recurring(item["id"])
        following = oracle_ticks(minute, hour, zone, ticks[-1])[1]
        assert stored is not None and stored.next_run_at == following, item["id"]
