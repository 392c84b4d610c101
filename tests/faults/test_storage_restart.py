"""The storage server restarts in the middle of a release of 50,000 jobs: the scheduler process
reconnects by itself (tenacity retries ``StorageUnavailableError``), finishes, and loses nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from devtools.scheduler_process import read_dispatches
from devtools.servers import Server
from devtools.waiting import wait_until
from storage_adapters import JobState
from tests.faults.conftest import DueJobs
from tests.faults.harness import SchedulerProcess, Tally, enqueued

pytestmark = [pytest.mark.slow, pytest.mark.postgresql, pytest.mark.redis]

# The 50,000. Batch mode releases them in a few seconds here; per_job (a few hundred
# jobs/s on two busy cores) would need minutes, so the restart test uses the batch path.
JOBS = 50_000
BATCH = 1000
LEASE = 5.0


@pytest.mark.parametrize("kind", ["postgresql", "redis"])
def test_storage_restarts_in_the_middle_of_a_release(
    kind: str,
    server_for: Callable[[str], Server],
    due_jobs: Callable[..., DueJobs],
    spawn: Callable[..., SchedulerProcess],
) -> None:
    server = server_for(kind)
    storage, prefix, ids = due_jobs(server.url, "restart", JOBS)
    # Given one scheduler process releasing 50,000 due jobs
    scheduler = spawn(
        "scheduler", server.url, [prefix], release_mode="batch", batch_size=BATCH,
        parallelism=4, poll_interval=0.1, lock_lease=LEASE,
    )  # fmt: skip
    scheduler.wait_ready()
    # When the server restarts while the release is under way (PostgreSQL twice: a fast
    # shutdown, then a crash, SIGKILL of every server process, which the next start recovers)
    faults = ["restart"] if kind == "redis" else ["restart", "crash"]
    outages = []
    for number, fault in enumerate(faults, start=1):
        mark = JOBS * number // (len(faults) + 2)
        at = wait_until(lambda: (n := enqueued(storage)) >= mark and n, timeout=120)  # noqa: B023
        assert at < JOBS, "the release ended before the fault could land in it"
        began = time.monotonic()
        if fault == "restart":
            server.stop()
        else:
            server.kill()
        server.start()
        outages.append(f"{fault} at {at} released, down {time.monotonic() - began:.2f} s")
    # Then the scheduler reconnects by itself and releases every job
    wait_until(lambda: enqueued(storage) == JOBS, timeout=120)
    assert scheduler.process.poll() is None, scheduler.log()[-3000:]
    log = scheduler.log()
    assert "(StorageUnavailableError: " in log, "the fault never reached the scheduler"
    dispatches = read_dispatches([scheduler.record])
    tally = Tally.count(
        f"{kind} {' + '.join(faults)} during a release of {JOBS} jobs",
        ids, [d.job_id for d in dispatches], storage,
        faults="; ".join(outages), retries_logged=log.count("(StorageUnavailableError: "),
    )  # fmt: skip
    tally.report()
    assert tally.lost == 0
    assert tally.dispatched == JOBS
    # At worst the batch in flight at each fault is sent again (claims whose result was lost).
    assert tally.duplicated <= BATCH * len(faults)
    assert storage.count_by_state()[JobState.SCHEDULED] == 0
