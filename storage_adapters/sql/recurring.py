"""The recurring-jobs family of the ``Storage`` contract on SQL (``RecurringStore`` in
``base.py``); its input checks and row mapping are in ``sql/recurring_rows.py``."""

from __future__ import annotations

from storage_adapters.checks.lookups import names_no_job
from storage_adapters.checks.values import (
    check_save_mode,
    flag,
    non_negative_offset,
    optional_epoch_seconds,
    positive_count,
)
from storage_adapters.errors import RecordExistsError, RecordNotFoundError
from storage_adapters.records import (
    Firing,
    LockLease,
    ManualFiring,
    NewRecurring,
    RecurringRecord,
    SaveMode,
)
from storage_adapters.sql.plumbing import RollBack, SQLPlumbing
from storage_adapters.sql.recurring_rows import (
    firing_params,
    recurring_record,
    save_params,
    trigger_params,
)
from storage_adapters.sql.statements import INITIAL_RECURRING_VERSION

__all__ = ["SQLRecurringStore"]


class SQLRecurringStore(SQLPlumbing):
    """Recurring jobs: saved, read, paused and fired with a compare-and-set on their version."""

    def save_recurring(self, recurring: NewRecurring, mode: SaveMode) -> bool:
        check_save_mode(mode)
        statement = self._sql.save_recurring[mode]
        # One statement: it writes nothing and returns no row when the mode refuses.
        version = self._scalar(statement, save_params(recurring))
        if version is None:
            if mode == "create":
                raise RecordExistsError(f"recurring job {recurring.id!r} already exists")
            raise RecordNotFoundError(f"recurring job {recurring.id!r} does not exist")
        return int(version) == INITIAL_RECURRING_VERSION

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        if names_no_job(recurring_id):
            return None
        rows = self._rows(self._sql.get_recurring, {"recurring_id": recurring_id})
        return recurring_record(rows[0]) if rows else None

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        params = {"limit": positive_count("limit", limit), "offset": non_negative_offset(offset)}
        return [recurring_record(row) for row in self._rows(self._sql.list_recurring, params)]

    def remove_recurring(self, recurring_id: str) -> bool:
        if names_no_job(recurring_id):
            return False
        return self._changed(self._sql.remove_recurring, {"recurring_id": recurring_id}) == 1

    def set_recurring_enabled(
        self, recurring_id: str, enabled: bool, next_run_at: float | None
    ) -> bool:
        params = {
            "recurring_id": recurring_id,
            "new_enabled": flag("enabled", enabled),
            "new_next_run_at": optional_epoch_seconds("next_run_at", next_run_at),
        }
        if names_no_job(recurring_id):
            return False
        return self._changed(self._sql.set_recurring_enabled, params) == 1

    def fetch_due_recurring(self, limit: int) -> list[RecurringRecord]:
        params = {"limit": positive_count("limit", limit)}
        return [recurring_record(row) for row in self._rows(self._sql.fetch_due_recurring, params)]

    def next_recurring_at(self) -> float | None:
        value = self._scalar(self._sql.next_recurring_at)
        return None if value is None else float(value)

    def fire_recurring(
        self, recurring_id: str, version: int, lock: LockLease, firing: Firing
    ) -> list[bool] | None:
        """The compare-and-set comes first: it takes the recurring row's write lock, so a
        racing firing of the same version waits for this one and then matches nothing."""
        params = {**firing_params(recurring_id, version, firing), **self._lease_params(lock)}
        with self._transaction() as conn:
            if conn.execute(self._sql.fire_recurring, params).first() is None:
                raise RollBack
            return self._insert_jobs(conn, firing.jobs)
        return None

    def trigger_recurring(
        self, recurring_id: str, version: int, firing: ManualFiring
    ) -> bool | None:
        """As ``fire_recurring``: the compare-and-set first, then the job, in one transaction."""
        params = trigger_params(recurring_id, version, firing)
        with self._transaction() as conn:
            if conn.execute(self._sql.trigger_recurring, params).first() is None:
                raise RollBack
            (created,) = self._insert_jobs(conn, (firing.job,))
            return created
        return None

    def count_recurring(self) -> int:
        return int(self._scalar(self._sql.count_recurring))
