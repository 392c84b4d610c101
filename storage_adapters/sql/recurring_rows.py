"""Recurring jobs in the SQL adapters: the input checks and row mapping behind ``SQLStorage``'s
recurring methods, apart from it so that module stays about plumbing and the job life cycle.

Every check runs before anything is written, so a bad save or firing is refused whole, the same
way ``check_new_jobs`` refuses a bad batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage_adapters.checks.values import check_manual_firing, check_new_recurring
from storage_adapters.records import ManualFiring, NewRecurring, PlannedFiring, RecurringRecord
from storage_adapters.sql.statements import SAVED_ARRAYS

__all__ = [
    "FIRING_ARRAYS",
    "SAVED_ARRAY_PARAMETERS",
    "firing_arrays",
    "firing_params",
    "recurring_record",
    "save_params",
    "saved_arrays",
    "trigger_params",
]


def save_params(recurring: NewRecurring, *, checked: bool = False) -> dict[str, Any]:
    """The bound parameters of ``Statements.save_recurring``, from ``recurring``, checked here
    unless the caller has (``checked``)."""
    if not checked:
        check_new_recurring(recurring)
    return {
        "recurring_id": recurring.id,
        "new_task": recurring.task,
        "new_payload": recurring.payload,
        "new_schedule": recurring.schedule,
        "new_enabled": recurring.enabled,
        "new_next_run_at": recurring.next_run_at,
    }


#: ``Statements.save_recurring_many``'s array parameters, one per column of ``SAVED_ARRAYS``.
SAVED_ARRAY_PARAMETERS = tuple(f"saved_{column}" for column in SAVED_ARRAYS)


def saved_arrays(recurrings: Sequence[NewRecurring]) -> dict[str, Any]:
    """The array parameters of ``Statements.save_recurring_many`` (``SAVED_ARRAY_PARAMETERS``),
    from recurring jobs ``check_new_recurrings`` has checked."""
    columns = (
        [recurring.id for recurring in recurrings],
        [recurring.task for recurring in recurrings],
        [recurring.payload for recurring in recurrings],
        [recurring.schedule for recurring in recurrings],
        [bool(recurring.enabled) for recurring in recurrings],
        [_float(recurring.next_run_at) for recurring in recurrings],
    )
    return dict(zip(SAVED_ARRAY_PARAMETERS, columns, strict=True))


def firing_params(item: PlannedFiring) -> dict[str, Any]:
    """The bound parameters of ``Statements.fire_recurring`` (but the lock's), from an item
    ``check_planned_firings`` has checked."""
    firing = item.firing
    return {
        "recurring_id": item.recurring_id,
        "expected_version": item.version,
        "new_next_run_at": firing.next_run_at,
        "new_last_run_at": firing.last_run_at,
        "new_history": firing.history,
    }


#: The array parameters of ``Statements.fire_recurring_many``, one per column.
FIRING_ARRAYS = (
    "planned_id",
    "planned_expected_version",
    "planned_next_run_at",
    "planned_last_run_at",
    "planned_history",
)


def firing_arrays(planned: Sequence[PlannedFiring]) -> dict[str, Any]:
    """The bound parameters of ``Statements.fire_recurring_many`` (but the lock's): one array
    per column (``FIRING_ARRAYS``), from items ``check_planned_firings`` has checked; times as
    floats, one element type per array."""
    ids, versions, next_runs, last_runs, histories = FIRING_ARRAYS
    return {
        ids: [item.recurring_id for item in planned],
        versions: [item.version for item in planned],
        next_runs: [_float(item.firing.next_run_at) for item in planned],
        last_runs: [_float(item.firing.last_run_at) for item in planned],
        histories: [item.firing.history for item in planned],
    }


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def trigger_params(recurring_id: str, version: int, firing: ManualFiring) -> dict[str, Any]:
    """The bound parameters of ``Statements.trigger_recurring``, with ``firing.job`` checked as
    ``add_jobs`` checks it."""
    check_manual_firing(version, firing)
    return {
        "recurring_id": recurring_id,
        "expected_version": version,
        "new_last_run_at": firing.last_run_at,
        "new_history": firing.history,
    }


def recurring_record(row: Sequence[Any]) -> RecurringRecord:
    """A row of ``RECURRING_FIELDS``, read by position: a ``Row`` or the driver's plain tuple
    (``SQLPlumbing._driver_rows``; SQLite's driver gives ``enabled`` as 0 or 1)."""
    recurring_id, task, payload, schedule, enabled, next_run_at, last_run_at, history = row[:8]
    version, created_at, updated_at, pause_note, paused_by, paused_at = row[8:]
    return RecurringRecord(
        id=recurring_id,
        task=task,
        payload=payload,
        schedule=schedule,
        enabled=bool(enabled),
        next_run_at=None if next_run_at is None else float(next_run_at),
        last_run_at=None if last_run_at is None else float(last_run_at),
        history=history,
        version=int(version),
        created_at=float(created_at),
        updated_at=float(updated_at),
        pause_note=pause_note,
        paused_by=paused_by,
        paused_at=None if paused_at is None else float(paused_at),
    )
