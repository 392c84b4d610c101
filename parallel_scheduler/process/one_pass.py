"""One pass of both schedulers, as ``--once`` runs it: stats out, and an exit status that a cron job
or a health check can act on.

``parallel-scheduler run --once`` and ``celery -A proj parallel-scheduler --once`` share it, so a
pass that could not send a job exits 1 and says how many jobs stayed due from either command.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from parallel_scheduler.engine.locked_loop import LockedScheduler
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.engine.stats import StatsT, combined
from parallel_scheduler.log_format import say
from parallel_scheduler.process.service import SchedulerService

__all__ = ["DUE_COUNT_LIMIT", "run_one_pass"]

#: After a failed pass, the jobs still due are counted up to this many.
DUE_COUNT_LIMIT = 100_000


def run_one_pass(service: SchedulerService) -> int:
    """Run one recurring and one delayed pass, print the settings and stats as JSON; 0 when every
    job was handed over, 1 (with a line on stderr naming how many jobs stayed due) otherwise."""
    # Full passes, not the loop's idle-skipping run_once: a one-off run says what it did. On a
    # sharded store each shard's schedulers run side by side, under their shard locks, on their
    # shard's own release path, as the service's loops do.
    recurring, _ = _run_passes(service.recurring_shards)
    delayed, delayed_shards = _run_passes(service.delayed_shards)
    report = {
        "settings": service.settings.describe(),
        "recurring": recurring.as_dict(),
        "delayed": delayed.as_dict(),
    }
    print(json.dumps(report, indent=2))
    locked = [shard for shard, stats in enumerate(delayed_shards) if not stats.lock_acquired]
    if len(delayed_shards) == 1 and locked:
        say(
            "parallel-scheduler: another scheduler holds the lock; this pass released nothing",
            logging.WARNING,
        )
    elif locked:
        say(
            "parallel-scheduler: another scheduler holds the lock of shard(s) "
            f"{', '.join(map(str, locked))}; this pass released nothing there",
            logging.WARNING,
        )
    if not (delayed.failed or recurring.failed):
        return 0
    storage = service.storage
    due = len(call_storage(lambda: storage.fetch_due_ids(DUE_COUNT_LIMIT), give_up_after=5.0))
    failures = [
        f"{count} {what}"
        for count, what in (
            (delayed.failed, "job(s) could not be sent"),
            (recurring.failed, "recurring job(s) could not fire"),
        )
        if count
    ]
    shown = f"{due}+" if due >= DUE_COUNT_LIMIT else str(due)
    say(
        f"parallel-scheduler: error: {' and '.join(failures)}; {shown} job(s) stayed due "
        "(the next pass tries them again)"
    )
    return 1


def _run_passes(
    schedulers: Sequence[LockedScheduler[StatsT]],
) -> tuple[StatsT, list[StatsT]]:
    """One full pass of each of ``schedulers`` (one per shard), side by side: their stats as
    one, and each shard's."""
    if len(schedulers) == 1:
        stats = schedulers[0].run_pass()
        return stats, [stats]
    started = time.monotonic()
    with ThreadPoolExecutor(len(schedulers), thread_name_prefix="once") as pool:
        passes: list[StatsT] = list(pool.map(lambda s: s.run_pass(), schedulers))
    return combined(passes, time.monotonic() - started), passes
