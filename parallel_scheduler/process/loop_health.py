"""Is this scheduler process still working? What its ``/healthz`` answers (process/metrics.py),
for a Kubernetes liveness probe: a process whose loops stopped making progress is restarted.

Each scheduler loop stamps ``LockedScheduler.progress_at`` (``time.monotonic()``) at every turn
and before every batch of a pass. A loop is stuck when its stamp is older than ``stall_after``:
the longest a healthy turn takes, which is a sleep (at most ``max(poll_interval, lock_lease)``,
backing off included), a peek and a lock attempt (each retried for at most one lease, the last
attempt of each taking up to ``connect_timeout``), and one batch (well within a lease): three
leases, a poll interval and two connect timeouts, 35 s with the defaults. A pass
whose pool never returns (a broker hand-off that hangs) or whose storage call never ends stops
the stamp; so does a dead loop thread, which is said as such.

Storage being down is not a stuck loop: a failing pass ends after its retries and the loop backs
off, stamping each turn, so a probe does not restart processes that cannot help. Only the loops
this process runs are judged: with shards, a shard's loop starts once the shard is served.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.settings import Settings

__all__ = ["loop_problems", "stall_after"]


def stall_after(settings: Settings) -> float:
    """Seconds without a progress stamp after which a loop counts as stuck."""
    return 3 * settings.lock_lease + settings.poll_interval + 2 * settings.connect_timeout


def loop_problems(
    loops: Mapping[LockedScheduler[Any], threading.Thread],
    settings: Settings,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """One line per loop that is dead or stuck, among ``loops`` (each scheduler with the thread
    that runs its loop); none: every loop makes progress."""
    limit = stall_after(settings)
    now = clock()
    problems = []
    for scheduler, thread in loops.items():
        if not thread.is_alive():
            problems.append(f"{scheduler.lock_label}: its loop thread has ended")
            continue
        quiet = now - scheduler.progress_at
        if quiet > limit:
            what = "a pass" if scheduler.held is not None else "its loop"
            problems.append(
                f"{scheduler.lock_label}: {what} has made no progress for {quiet:.0f} s "
                f"(stuck after {limit:.0f} s)"
            )
    return problems
