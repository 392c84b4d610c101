"""Three scheduler processes racing over 20,000 due jobs: every job is dispatched exactly once."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import storage_adapters
from devtools.waiting import wait_until
from parallel_scheduler import CallableDispatcher, DelayedJobScheduler, Settings
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.recurring.jobs import firing_id
from parallel_scheduler.recurring.scheduler import RecurringJobScheduler
from parallel_scheduler.recurring.triggers import Schedule
from storage_adapters import JobState, NewJob, NewRecurring, Storage, list_jobs
from tests.conftest import set_up_storage, storage_url

pytestmark = pytest.mark.slow
JOBS = 20_000
PROCESSES = 3


def scheduler_process(
    url: str, prefix: str, out: str, release_mode: str, stop: Any, started: Any
) -> None:
    """One scheduler process: records each dispatched job id on its own line in ``out``."""
    storage = storage_adapters.from_url(url, prefix=prefix, pool_size=4)
    with open(out, "a", buffering=1) as sink:

        def record(task: str, args: Any, kwargs: Any, options: Any, job_id: str) -> None:
            sink.write(job_id + "\n")

        settings = Settings(
            batch_size=500,
            max_degree_of_parallelism=4,
            poll_interval=0.02,
            release_mode=release_mode,
        )
        scheduler = DelayedJobScheduler(storage, CallableDispatcher(record), settings)
        threading.Thread(target=lambda: (stop.wait(), scheduler.stop()), daemon=True).start()
        started.wait()
        scheduler.run_forever(install_signal_handlers=False)
        scheduler.close()
    storage.close()


def fresh_storage(adapter_kind: str, tmp_path: Path) -> tuple[str, str, Storage]:
    """A set-up storage under a new prefix, with the URL and prefix the racing processes open."""
    url = storage_url(adapter_kind, tmp_path)
    return (url, *set_up_storage(url))


@pytest.mark.parametrize("adapter_kind", ["postgresql", "redis"])
@pytest.mark.parametrize("release_mode", ["per_job", "batch"])
def test_three_schedulers_dispatch_each_job_exactly_once(
    adapter_kind: str, release_mode: str, tmp_path: Path
) -> None:
    url, prefix, storage = fresh_storage(adapter_kind, tmp_path)
    try:
        # Given 20,000 jobs that are all due
        now = storage.now()
        ids = [f"race-{i}" for i in range(JOBS)]
        for first in range(0, JOBS, 5000):
            page = [NewJob(i, "tasks.race", "{}", now - 1) for i in ids[first : first + 5000]]
            # retried as the scheduler retries: a stall of a loaded machine inside the insert's
            # transaction ends it (PostgreSQL's idle-in-transaction timeout), and it is idempotent
            call_storage(lambda page=page: storage.add_jobs(page))
        # When three scheduler processes start together
        context = multiprocessing.get_context("spawn")
        stop, started = context.Event(), context.Event()
        outs = [tmp_path / f"sent-{n}.txt" for n in range(PROCESSES)]
        processes = [
            context.Process(
                target=scheduler_process, args=(url, prefix, str(out), release_mode, stop, started)
            )
            for out in outs
        ]
        for process in processes:
            process.start()
        started.set()
        try:
            wait_until(lambda: storage.count_by_state()[JobState.ENQUEUED] == JOBS, timeout=240)
        finally:
            stop.set()
            for process in processes:
                process.join(timeout=60)
        # Then every job was dispatched exactly once across all processes
        assert all(p.exitcode == 0 for p in processes)
        sent = Counter(line for out in outs for line in out.read_text().splitlines())
        assert sent == Counter(ids)
        assert storage.count_by_state()[JobState.SCHEDULED] == 0
    finally:
        storage.drop()
        storage.close()


RECURRING = 10_000


def recurring_process(url: str, prefix: str, out: str, stop: Any, started: Any) -> None:
    """One recurring scheduler process: writes how many firing jobs its passes created."""
    storage = storage_adapters.from_url(url, prefix=prefix, pool_size=4)
    settings = Settings(batch_size=500, max_degree_of_parallelism=4)
    scheduler = RecurringJobScheduler(storage, settings)
    created = 0
    started.wait()
    while not stop.is_set():
        stats = scheduler.run_once()
        created += stats.created
        if not stats.lock_acquired or not stats.fetched:
            stop.wait(0.01)
    scheduler.close()
    storage.close()
    Path(out).write_text(str(created))


@pytest.mark.parametrize("adapter_kind", ["postgresql", "redis"])
def test_three_schedulers_fire_each_recurring_tick_exactly_once(
    adapter_kind: str, tmp_path: Path
) -> None:
    url, prefix, storage = fresh_storage(adapter_kind, tmp_path)
    try:
        # Given 10,000 hourly recurring jobs, all due on the current minute's tick; their next tick
        # is an hour away, so it cannot fall due during the race (an hour boundary once did:
        # 20,000 firings, every job's next tick fired too)
        tick = (storage.now() // 60) * 60
        minute = int(tick // 60) % 60
        schedule = Schedule(f"{minute} * * * *").to_json()
        for i in range(RECURRING):
            storage.save_recurring(
                NewRecurring(f"r{i}", "tasks.r", "{}", schedule, True, tick), "create"
            )
        # When three recurring scheduler processes race over them
        context = multiprocessing.get_context("spawn")
        stop, started = context.Event(), context.Event()
        outs = [tmp_path / f"created-{n}.txt" for n in range(PROCESSES)]
        processes = [
            context.Process(target=recurring_process, args=(url, prefix, str(o), stop, started))
            for o in outs
        ]
        for process in processes:
            process.start()
        started.set()
        try:
            wait_until(lambda: not storage.fetch_due_recurring(1), timeout=240)
        finally:
            stop.set()
            for process in processes:
                process.join(timeout=60)
        # Then there are exactly 10,000 firings, one per recurring job, each created once
        assert all(p.exitcode == 0 for p in processes)
        assert sum(int(o.read_text()) for o in outs) == RECURRING
        firings = list_jobs(storage, None, limit=RECURRING + 10)
        assert sorted(j.id for j in firings) == sorted(
            firing_id(f"r{i}", tick) for i in range(RECURRING)
        )
        assert all(j.due_at == tick for j in firings)
    finally:
        storage.drop()
        storage.close()
