"""``pause_after_failures``: a recurring job that pauses itself after K failed firings in a row
(``Schedule.pause_after_failures``; the values are checked in ``failure_policy.py``).

When a job with ``pause_after_failures=K`` is due with a tick to fire, the firing step's planning
looks at the K scheduled ticks just before its due tick (triggers and backfills do not count,
as for ``max_runs``; ticks on excluded dates are passed over). If each of them fired (it is in the
job's history) and each firing's latest execution outcome is ``failed`` (a retried run that
failed in the end is ``failed``), the job is **paused instead of fired**: it is left out of the
chunk's storage step, and afterwards paused with ``set_recurring_enabled`` (note "paused after K
consecutive failed firings (last: <job id>)", by ``PAUSED_BY``). Anything else breaks the count:
a succeeded or revoked firing, one with no outcome yet (still running, or never recorded), or a
tick that did not fire (passed while paused, skipped or collapsed by ``overlap``, dropped by the
misfire policy). So a resumed job starts counting afresh: the tick it was paused at never fired.

The outcomes are read with overlap's in ONE ``overlap.read_latest`` per chunk. The pause comes
after the job was left out of the step, so a scheduler cannot both fire and pause one tick, and
it is a compare-and-set on the version the pass read, so a job resumed or edited meanwhile (by a
person, or another scheduler) is not paused: the next pass decides again on what it reads then.
Failures recorded between ticks change nothing until the next due tick, which is then not fired.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import NamedTuple

from parallel_scheduler.calendars import Calendar, Exclusion
from parallel_scheduler.engine.held_lock import HeldLock
from parallel_scheduler.engine.retrying import call_storage
from parallel_scheduler.ranges import in_range
from parallel_scheduler.recurring.history import read_history
from parallel_scheduler.recurring.misfires import FiringPlan
from parallel_scheduler.recurring.overlap import Planned, apply_overlap, overlap_ids, read_latest
from parallel_scheduler.recurring.triggers import Schedule, ticks_back
from storage_adapters import OutcomeEvent, OutcomeState, RecurringRecord, Storage, StorageError

__all__ = ["PAUSED_BY", "Pause", "failed_streak", "gate_outcomes", "pause_all", "pause_note"]

logger = logging.getLogger(__name__)

#: Who the pause of a job that reached its ``pause_after_failures`` is by, as listings show it.
PAUSED_BY = "parallel-scheduler"


class Pause(NamedTuple):
    """A due job not to fire but to pause: its id, the next run it keeps, the note, and the
    version it was read at (the pause is a compare-and-set on it)."""

    recurring_id: str
    next_run_at: float | None
    note: str
    version: int


#: Per staged job: overlap's plan and the ticks it held back, or the pause that replaces it.
Gate = tuple[FiringPlan, int] | Pause


def pause_note(failures: int, last_job_id: str) -> str:
    """The pause's note, naming the count and the newest failed firing."""
    if failures == 1:
        return f"paused after 1 failed firing (last: {last_job_id})"
    return f"paused after {failures} consecutive failed firings (last: {last_job_id})"


def _scheduled_ticks(history: str) -> dict[float, str]:
    """The scheduled ticks the history keeps (triggers left out), each with its firing's id."""
    fired: dict[float, str] = {}
    for entry in read_history(history, []):
        tick, job_id = entry.get("tick"), entry.get("job_id")
        if entry.get("trigger") is True or not isinstance(job_id, str):
            continue
        if isinstance(tick, (int, float)) and not isinstance(tick, bool) and in_range(tick):
            fired[float(tick)] = job_id
    return fired


def failed_streak(
    record: RecurringRecord, schedule: Schedule, calendars: Mapping[str, Calendar] | None
) -> list[str] | None:
    """The firing ids of the ``pause_after_failures`` ticks just before the job's due tick,
    newest first, when each of them fired; ``None`` when one did not (or too few are kept)."""
    wanted, due = schedule.pause_after_failures, record.next_run_at
    fired = _scheduled_ticks(record.history)
    if wanted is None or due is None or len(fired) < wanted:
        return None
    exclusion = Exclusion.of(schedule.exclude, calendars) if calendars else None
    ids: list[str] = []
    oldest = sorted(fired)[-wanted]
    for tick in ticks_back(schedule, oldest, math.nextafter(due, -math.inf)):
        if exclusion is not None and exclusion.span(tick) is not None:
            continue  # never a tick to fire: it neither counts nor breaks the count
        job_id = fired.get(tick)
        if job_id is None:
            return None  # a tick that did not fire: the count starts after it
        ids.append(job_id)
        if len(ids) == wanted:
            return ids
    return None


def _failed(event: OutcomeEvent | None) -> bool:
    """Whether a firing's latest outcome is a final failure (none yet, or retried: not yet)."""
    return event is not None and event.state is OutcomeState.FAILED


def gate_outcomes(
    storage: Storage,
    items: Sequence[Planned],
    now: float,
    calendars: Mapping[str, Calendar] | None,
) -> list[Gate]:
    """Each item's plan under its ``overlap`` (``overlap.apply_overlap``), or its ``Pause``
    when its ``pause_after_failures`` is reached: one outcome read for both, none when no item
    needs one."""
    streaks: dict[int, list[str]] = {}
    for i, (record, schedule, plan) in enumerate(items):
        if schedule.pause_after_failures is not None and plan.ticks:
            streak = failed_streak(record, schedule, calendars)
            if streak is not None:
                streaks[i] = streak
    if not streaks:
        return list(apply_overlap(storage, items, now, calendars))
    wanted = [job_id for ids in overlap_ids(items, now).values() for job_id in ids]
    latest = read_latest(storage, wanted + [job_id for ids in streaks.values() for job_id in ids])
    pauses: dict[int, Pause] = {}
    for i, ids in streaks.items():
        if all(_failed(latest.get(job_id)) for job_id in ids):
            record = items[i][0]
            pauses[i] = Pause(
                record.id, record.next_run_at, pause_note(len(ids), ids[0]), record.version
            )
    kept = [item for i, item in enumerate(items) if i not in pauses]
    decided = iter(apply_overlap(storage, kept, now, calendars, latest))
    return [pauses[i] if i in pauses else next(decided) for i in range(len(items))]


def pause_all(storage: Storage, held: HeldLock, pauses: Sequence[Pause]) -> list[bool]:
    """Pause each job of ``pauses`` (left out of the firing step already), while ``held`` is
    still this scheduler's and the job is still as it was read; per job, whether it was paused
    (``False``: the lease ran out, the job is gone or changed meanwhile (resumed, edited), or
    storage refused: the next pass that finds it due decides again)."""
    done: list[bool] = []
    for pause in pauses:
        if not held.valid():
            done.append(False)
            continue
        write = partial(
            storage.set_recurring_enabled,
            pause.recurring_id,
            False,
            pause.next_run_at,
            note=pause.note,
            paused_by=PAUSED_BY,
            version=pause.version,
        )
        try:
            paused = call_storage(write)
        except StorageError as exc:  # the firings of the step are made: report them anyway
            logger.warning("could not pause recurring job %s: %s", pause.recurring_id, exc)
            paused = False
        if paused:
            logger.warning("recurring job %s %s", pause.recurring_id, pause.note)
        done.append(paused)
    return done
