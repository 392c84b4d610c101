"""The recurring-jobs family of the ``Storage`` contract on SQL (``RecurringStore`` in
``base.py``); its input checks and row mapping are in ``sql/recurring_rows.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage_adapters.checks.lookups import checked_id_batch, names_no_job
from storage_adapters.checks.pauses import check_pause_note
from storage_adapters.checks.values import (
    check_new_recurrings,
    check_planned_firings,
    check_save_mode,
    epoch_seconds,
    flag,
    non_negative_offset,
    optional_epoch_seconds,
    positive_count,
)
from storage_adapters.errors import refused_save
from storage_adapters.records import (
    LockLease,
    ManualFiring,
    NewRecurring,
    PlannedFiring,
    RecurringRecord,
    SaveMode,
)
from storage_adapters.sql.driver import BinaryArrays
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import RollBack, SQLPlumbing
from storage_adapters.sql.recurring_rows import (
    FIRING_ARRAYS,
    SAVED_ARRAY_PARAMETERS,
    firing_arrays,
    firing_params,
    recurring_record,
    save_params,
    saved_arrays,
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
            raise refused_save(mode, [recurring.id])
        return int(version) == INITIAL_RECURRING_VERSION

    @rerun_if_ended_idle
    def save_recurring_many(self, recurrings: Sequence[NewRecurring], mode: SaveMode) -> list[bool]:
        """One transaction for the chunk. On PostgreSQL, one statement writes every row the mode
        allows and returns their versions; on SQLite, which ids exist is read first, the mode
        checked against it, then every row written in one executemany."""
        check_save_mode(mode)
        check_new_recurrings(recurrings)
        if not recurrings:
            return []
        by_arrays = self._sql.save_recurring_many
        if by_arrays is not None:
            return self._save_by_arrays(by_arrays[mode], recurrings, mode)
        ids = [recurring.id for recurring in recurrings]
        refused: list[str] = []
        with self._transaction() as conn:
            bound = {"ids": self._dialect.bind_ids(ids)}
            existing = set(conn.execute(self._sql.existing_recurring, bound).scalars().all())
            refused = [rid for rid in ids if (rid in existing) == (mode == "create")]
            if mode != "upsert" and refused:
                raise RollBack
            params = [save_params(recurring, checked=True) for recurring in recurrings]
            written = conn.execute(self._sql.save_recurring[mode], params).all()
            if mode == "create" and len(written) < len(ids):
                refused = ids  # some were created meanwhile, by a racing save
                raise RollBack
            return [rid not in existing for rid in ids]
        raise refused_save(mode, refused)

    def _save_by_arrays(
        self,
        statement: sa.Insert | sa.Update,
        recurrings: Sequence[NewRecurring],
        mode: SaveMode,
    ) -> list[bool]:
        """``save_recurring_many`` on PostgreSQL: the chunk in one statement; a chunk of which
        the mode refused any id is rolled back whole."""
        ids = [recurring.id for recurring in recurrings]
        refused: list[str] = []
        arrays = self._compiled_arrays(statement, SAVED_ARRAY_PARAMETERS)
        with self._transaction() as conn:
            params = {**arrays.constants, **saved_arrays(recurrings)}
            written = conn.exec_driver_sql(arrays.sql, params).all()
            versions: dict[str, int] = {row[0]: int(row[1]) for row in written}
            refused = [rid for rid in ids if rid not in versions]
            if refused:
                raise RollBack
            return [versions[rid] == INITIAL_RECURRING_VERSION for rid in ids]
        raise refused_save(mode, refused)

    def get_recurring(self, recurring_id: str) -> RecurringRecord | None:
        if names_no_job(recurring_id):
            return None
        rows = self._rows(self._sql.get_recurring, {"recurring_id": recurring_id})
        return recurring_record(rows[0]) if rows else None

    @rerun_if_ended_idle
    def existing_recurring_ids(self, recurring_ids: Sequence[str]) -> set[str]:
        ids = checked_id_batch(recurring_ids)
        if not ids:
            return set()
        bound = {"ids": self._dialect.bind_ids(ids)}
        with self._transaction() as conn:
            return set(conn.execute(self._sql.recurring_ids_in, bound).scalars().all())

    def list_recurring(self, limit: int, offset: int = 0) -> list[RecurringRecord]:
        params = {"limit": positive_count("limit", limit), "offset": non_negative_offset(offset)}
        return [recurring_record(row) for row in self._rows(self._sql.list_recurring, params)]

    def remove_recurring(self, recurring_id: str) -> bool:
        if names_no_job(recurring_id):
            return False
        return self._changed(self._sql.remove_recurring, {"recurring_id": recurring_id}) == 1

    def set_recurring_enabled(
        self,
        recurring_id: str,
        enabled: bool,
        next_run_at: float | None,
        note: str = "",
        paused_by: str = "",
        version: int | None = None,
    ) -> bool:
        checked_note, checked_by = check_pause_note(note, paused_by)
        paused = not flag("enabled", enabled)
        params = {
            "recurring_id": recurring_id,
            "new_enabled": not paused,
            "new_next_run_at": optional_epoch_seconds("next_run_at", next_run_at),
            "new_pause_note": checked_note if paused else None,
            "new_paused_by": checked_by if paused else None,
            "expected_version": None if version is None else int(version),
        }
        if names_no_job(recurring_id):
            return False
        return self._changed(self._sql.set_recurring_enabled, params) == 1

    def fetch_due_recurring(
        self, limit: int, until: float | None = None, offset: int = 0
    ) -> list[RecurringRecord]:
        params: dict[str, Any] = {"limit": positive_count("limit", limit)}
        params["offset"] = non_negative_offset(offset)
        statement = self._sql.fetch_due_recurring
        if until is not None:
            params["until"] = epoch_seconds("until", until)
            statement = self._sql.fetch_recurring_until
        # on the driver (plain tuples): a recurring burst reads a batch of rows per pass
        rows = self._driver_rows(statement, params)
        return [recurring_record(row) for row in rows]

    def next_recurring_at(self) -> float | None:
        value = self._scalar(self._sql.next_recurring_at)
        return None if value is None else float(value)

    @rerun_if_ended_idle
    def fire_recurring_many(
        self, lock: LockLease, planned: Sequence[PlannedFiring]
    ) -> list[list[bool] | None]:
        """One transaction for the chunk: the compare-and-sets first (they take the recurring
        rows' write locks, so a racing firing of the same versions waits for this one and then
        matches nothing), then the firing jobs of those that held, in one insert."""
        check_planned_firings(planned)
        if not planned:
            return []
        fence = self._lease_params(lock)
        with self._transaction() as conn:
            fired = self._compare_and_set(conn, planned, fence)
            jobs = [
                job for item in planned if item.recurring_id in fired for job in item.firing.jobs
            ]
            created = {
                job.id for job, new in zip(jobs, self._insert_jobs(conn, jobs), strict=True) if new
            }
            return [
                [job.id in created for job in item.firing.jobs]
                if item.recurring_id in fired
                else None
                for item in planned
            ]
        raise AssertionError("unreachable: the transaction is never rolled back")

    def _compare_and_set(
        self, conn: Connection, planned: Sequence[PlannedFiring], fence: dict[str, Any]
    ) -> set[str]:
        """The ids of ``planned`` whose version still matched, now advanced."""
        statement = self._sql.fire_recurring_many
        if statement is not None:  # PostgreSQL: the chunk in one statement, binary arrays
            arrays = self._compiled_arrays(statement, FIRING_ARRAYS)
            params = {**arrays.constants, **fence, **firing_arrays(planned)}
            return set(conn.exec_driver_sql(arrays.sql, params).scalars().all())
        return {
            item.recurring_id
            for item in planned
            if conn.execute(self._sql.fire_recurring, {**fence, **firing_params(item)}).first()
        }

    def _compiled_arrays(
        self, statement: sa.Insert | sa.Update, names: tuple[str, ...]
    ) -> BinaryArrays:
        """``statement`` (one of ``Statements``' array statements) as the driver runs it,
        compiled on first use; a sibling's statements (another prefix's tables) are others."""
        compiled = self._array_statements.get(id(statement))
        if compiled is None or compiled[0] is not statement:
            compiled = (statement, BinaryArrays(statement, self._engine.dialect, names))
            self._array_statements[id(statement)] = compiled
        return compiled[1]

    @rerun_if_ended_idle
    def trigger_recurring(
        self, recurring_id: str, version: int, firing: ManualFiring
    ) -> bool | None:
        """As ``fire_recurring_many``: the compare-and-set first, then the job, in one
        transaction."""
        params = trigger_params(recurring_id, version, firing)
        with self._transaction() as conn:
            if conn.execute(self._sql.trigger_recurring, params).first() is None:
                raise RollBack
            (created,) = self._insert_jobs(conn, (firing.job,))
            return created
        return None

    def count_recurring(self) -> int:
        return int(self._scalar(self._sql.count_recurring))
