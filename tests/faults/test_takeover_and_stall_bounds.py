"""How fast a dead holder is replaced with the default lease, and what a stall in ``batch`` mode
can send twice.

* Take-over: the lock holder is SIGKILLed mid-pass with the default ``lock_lease`` and
  ``poll_interval``; the waiting process releases its first job no sooner than the dead lease
  ran out and no later than a lease plus a poll interval (plus slack for a busy machine).
* Stall: a ``batch``-mode holder is SIGSTOPped mid-release, the other process takes over and
  releases everything, then the frozen one is resumed. What went twice is what it had sent and
  not yet marked: at most one chunk per pool thread. Nothing is lost, and the resumed process
  reports those jobs as sent in time, not "sent after its claim expired".
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from devtools.scheduler_process import lock_holder_process, read_dispatches
from devtools.servers import Server
from devtools.waiting import wait_until
from parallel_scheduler import Settings
from parallel_scheduler.delayed.paths import chunk_for
from storage_adapters import JobState
from tests.faults.conftest import DueJobs, HolderFault, Pair
from tests.faults.harness import Tally, enqueued

pytestmark = [pytest.mark.slow, pytest.mark.postgresql, pytest.mark.redis]

DEFAULTS = Settings()
# Scheduling noise on a loaded two-core machine, on top of the lease + poll bound.
SLACK = 2.0
LATE_WARNING = "was sent after its claim expired"
IN_TIME_WARNING = "whose send started while their claim was valid"


def test_takeover_after_sigkill_with_the_default_lease(holder_fault: HolderFault) -> None:
    kind, release_mode, server = holder_fault.kind, holder_fault.release_mode, holder_fault.server
    # Enough due jobs, at 5 ms a hand-off, that the holder is mid-pass when it dies and work is
    # left for the other process once it takes over.
    jobs = 3_000
    storage, prefix, ids = holder_fault.due_jobs(server.url, "takeover", jobs)
    lease, poll = DEFAULTS.lock_lease, DEFAULTS.poll_interval
    settings = {
        "release_mode": release_mode, "batch_size": DEFAULTS.batch_size,
        "parallelism": DEFAULTS.max_degree_of_parallelism, "poll_interval": poll,
        "lock_lease": lease, "dispatch_delay": 0.005,
    }  # fmt: skip
    # Given two scheduler processes with the default lease and poll interval
    pair = holder_fault.spawn_pair(server.url, prefix, settings)
    # When the lock holder is SIGKILLed in the middle of a pass
    victim = pair.holder_after(storage, 300)
    survivor = pair.other(victim)
    dead_lease = storage.lock_holder("delayed-scheduler")
    assert dead_lease is not None and victim.owns(dead_lease.owner)
    killed_at = time.time()
    victim.send(signal.SIGKILL)
    victim.wait(timeout=10)

    # Then the survivor releases a due job within a lease and a poll interval of the kill,
    # and not before the dead holder's lease ran out
    def first_after_kill() -> float | None:
        times = [d.at for d in read_dispatches([survivor.record]) if d.at > killed_at]
        return min(times) if times else None

    first_send = wait_until(first_after_kill, timeout=lease + poll + 60)
    takeover = first_send - killed_at
    assert first_send >= dead_lease.expires_at - 0.05, "released under a live lease"
    assert takeover <= lease + poll + SLACK, f"take-over took {takeover:.2f} s"
    # And every job is released, none lost
    wait_until(lambda: enqueued(storage) == jobs, timeout=120)
    tally = Tally.count(
        f"take-over after SIGKILL, default lease ({kind}, {release_mode})", ids,
        [d.job_id for d in read_dispatches(pair.records)], storage,
        lease_s=lease, poll_s=poll, takeover_s=round(takeover, 2),
    )  # fmt: skip
    tally.report()
    assert tally.lost == 0
    per_thread = 1 if release_mode == "per_job" else chunk_for(storage)
    bound = DEFAULTS.max_degree_of_parallelism * per_thread
    assert tally.duplicated <= bound


def test_sigstop_in_batch_mode_duplicates_at_most_one_chunk_per_thread(
    postgres: Server,
    due_jobs: Callable[..., DueJobs],
    spawn_pair: Callable[..., Pair],
) -> None:
    jobs, batch, parallelism, lease = 4_000, 1_000, 2, 3.0
    storage, prefix, ids = due_jobs(postgres.url, "stall", jobs)
    settings = {
        "release_mode": "batch", "batch_size": batch, "parallelism": parallelism,
        "poll_interval": 0.05, "lock_lease": lease, "dispatch_delay": 0.001,
    }  # fmt: skip
    # Given two batch-mode processes, each batch of 1,000 sent by two threads
    pair = spawn_pair(postgres.url, prefix, settings)
    # When the holder is frozen in the middle of a batch
    stale = pair.holder_after(storage, batch + batch // 2)
    other = pair.other(stale)
    stale.send(signal.SIGSTOP)
    frozen_at = time.time()
    claimed = storage.count_by_state()[JobState.CLAIMED]
    # And the other takes over and releases every job, the frozen one's claims included
    wait_until(lambda: lock_holder_process(storage, pair.processes) is other, timeout=lease + 30)
    wait_until(lambda: enqueued(storage) == jobs, timeout=120)
    # And the frozen one is resumed
    stale.send(signal.SIGCONT)
    resumed_at = time.time()
    wait_until(lambda: "pass released" in stale.log(), timeout=30)
    dispatches = read_dispatches(pair.records)
    late = [d for d in dispatches if d.by == stale.name and d.at > resumed_at]
    tally = Tally.count(
        "SIGSTOP of a batch-mode holder, SIGCONT after the take-over", ids,
        [d.job_id for d in dispatches], storage, claimed_at_stop=claimed,
        sent_by_stale_after_resume=len(late), stalled_s=round(resumed_at - frozen_at, 2),
    )  # fmt: skip
    tally.report()
    # Then nothing is lost, and what went twice is at most one chunk per thread
    assert tally.lost == 0
    assert tally.duplicated <= parallelism * chunk_for(storage), f"{tally.duplicated} duplicates"
    # And the resumed process sent at most the sends it had under way (one per thread)
    assert len(late) <= parallelism
    # And it tells those jobs apart from late sends: they went while their claim was valid
    log = stale.log()
    assert LATE_WARNING not in log, log[-3000:]
    if tally.duplicated > len(late):
        assert IN_TIME_WARNING in log, log[-3000:]
