"""Where a recurring job is accepted: every argument of ``save`` (and of each ``save_many``
item) validated and turned into the row storage keeps, with its next run; nothing is written
here, so a refused job leaves storage as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from parallel_scheduler.calendars import check_exclude
from parallel_scheduler.errors import InvalidItemError, InvalidJobError
from parallel_scheduler.jitter import check_jitter
from parallel_scheduler.jobs import JobSpec, display_instant
from parallel_scheduler.recurring.overlap_policy import (
    DEFAULT_OVERLAP_TIMEOUT,
    OverlapPolicy,
    check_recorded,
)
from parallel_scheduler.recurring.triggers import MisfirePolicy, Schedule, next_tick
from storage_adapters import InvalidIdentifierError, NewRecurring, validate_job_id

__all__ = ["MAX_RECURRING_ID_LENGTH", "item_record", "new_recurring", "validate_recurring_id"]

MAX_RECURRING_ID_LENGTH = 200 - len("@trigger-2026-01-01T00:00:00.000000Z")


def validate_recurring_id(recurring_id: str) -> str:
    try:
        validate_job_id(recurring_id)
    except InvalidIdentifierError as exc:
        raise InvalidJobError(f"recurring job id: {exc}") from None
    if "@" in recurring_id:
        raise InvalidJobError(f"recurring job id {recurring_id!r} must not contain '@'")
    if len(recurring_id) > MAX_RECURRING_ID_LENGTH:
        raise InvalidJobError(
            f"recurring job id is {len(recurring_id)} characters; the limit is "
            f"{MAX_RECURRING_ID_LENGTH}"
        )
    return recurring_id


def new_recurring(
    recurring_id: str,
    task: str,
    cron: str = "",
    *,
    every: float | timedelta | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    timezone: str = "UTC",
    start: datetime | None = None,
    end: datetime | None = None,
    misfire_policy: MisfirePolicy = "run_once",
    misfire_cap: int = 100,
    misfire_grace: float = 60.0,
    jitter: float | timedelta | None = None,
    catch_up_window: float | timedelta | None = None,
    exclude: Sequence[str] = (),
    max_runs: int | None = None,
    overlap: OverlapPolicy = "allow",
    overlap_timeout: float | timedelta = DEFAULT_OVERLAP_TIMEOUT,
    pause_after_failures: int | None = None,
    outcomes_recorded: bool = True,
    enabled: bool = True,
    now: float,
    max_payload_bytes: int,
    **options: Any,
) -> NewRecurring:
    """The recurring job as stored, every argument validated (``RecurringJobs.save`` documents
    them), its next run the first tick after ``now``; ``InvalidJobError`` names what is wrong.
    ``outcomes_recorded``: ``Settings.record_outcomes``, which an ``overlap`` and a
    ``pause_after_failures`` need."""
    validate_recurring_id(recurring_id)
    schedule = Schedule(
        cron,
        timezone=timezone,
        start_at=_epoch(start, "start"),
        end_at=_epoch(end, "end"),
        misfire_policy=misfire_policy,
        misfire_cap=misfire_cap,
        misfire_grace=misfire_grace,
        every=_seconds(every),
        jitter=check_jitter(jitter),
        catch_up_window=_seconds(catch_up_window),
        exclude=check_exclude(exclude),
        max_runs=max_runs,
        overlap=overlap,
        overlap_timeout=_seconds(overlap_timeout),  # type: ignore[arg-type]
        pause_after_failures=pause_after_failures,
    )
    check_recorded(schedule.overlap, outcomes_recorded, schedule.pause_after_failures)
    spec = JobSpec(task, args=args, kwargs=kwargs or {}, options=options, id=recurring_id)
    payload = spec.encode(0.0, max_payload_bytes).payload
    upcoming = next_tick(schedule, now)
    if upcoming is None:
        raise InvalidJobError(
            f"schedule {schedule.describe()} of recurring job {recurring_id!r} never fires "
            f"again: its end date {display_instant(schedule.end_at)} is before its next tick"
        )
    return NewRecurring(
        id=recurring_id,
        task=task,
        payload=payload,
        schedule=schedule.to_json(),
        enabled=enabled,
        next_run_at=upcoming,
    )


def item_record(
    position: int,
    item: Mapping[str, Any],
    now: float,
    max_payload_bytes: int,
    outcomes_recorded: bool = True,
) -> NewRecurring:
    """One ``save_many`` item as it is stored, or ``InvalidItemError`` naming the item."""
    if not isinstance(item, Mapping):
        raise InvalidItemError(
            f"recurring job #{position}: a mapping of save()'s arguments is expected, "
            f"not {type(item).__name__}; nothing was written",
            position,
        )
    fields = dict(item)
    recurring_id = fields.pop("id", None)
    try:
        if not isinstance(recurring_id, str):
            raise InvalidJobError("its id (the key 'id') is missing or not text")
        task = fields.pop("task", None)
        if not isinstance(task, str):
            raise InvalidJobError("its task (the key 'task') is missing or not text")
        if "mode" in fields or "now" in fields:
            raise InvalidJobError("'mode' is save_many's argument, not an item's")
        return new_recurring(
            recurring_id,
            task,
            now=now,
            max_payload_bytes=max_payload_bytes,
            outcomes_recorded=outcomes_recorded,
            **fields,
        )
    except (InvalidJobError, TypeError) as exc:
        shown = f" ({recurring_id!r})" if isinstance(recurring_id, str) else ""
        raise InvalidItemError(
            f"recurring job #{position}{shown}: {exc}; nothing was written", position
        ) from None


def _seconds(value: float | timedelta | None) -> float | None:
    """A duration given as a ``timedelta`` in seconds; anything else as given (checked later)."""
    return value.total_seconds() if isinstance(value, timedelta) else value


def _epoch(moment: datetime | None, name: str) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise InvalidJobError(f"{name} date {moment.isoformat()} has no time zone")
    return moment.timestamp()
