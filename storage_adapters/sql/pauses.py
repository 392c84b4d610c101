"""Pauses of a queue or a task in SQL: the ``PauseStore`` family of ``SQLStorage``.

A pause is a row of ``{prefix}_pauses``; the jobs it holds are in state ``'held'``, which no
claim or read of the due set looks at (they all ask for ``'scheduled'``, and PostgreSQL's due
index holds scheduled jobs only). Every statement that would make a job scheduled writes
``scheduled_or_held`` instead (``sql/pause_statements.py``), reading the pauses in that same
statement, so the rule needs no read-then-write anywhere.

``pause`` and ``resume`` are each one transaction: the pause's row, then one update of its jobs.
What makes them atomic against the statements accepting or giving back jobs at the same time:

* On PostgreSQL (READ COMMITTED), each first takes ``LOCK TABLE {prefix}_jobs IN SHARE ROW
  EXCLUSIVE MODE`` (``Dialect.pause_lock``). It conflicts with the ROW EXCLUSIVE lock every
  INSERT and UPDATE of the jobs holds until its transaction ends, and with itself. So the pause
  waits until every writer in flight has committed, and its update, whose snapshot is taken
  after that, holds what they wrote as scheduled; and a writer arriving meanwhile waits for the
  pause's commit and takes its snapshot (the one its pause check reads) after it. Without the
  lock, an accept whose snapshot predates the pause's commit would write a job scheduled that the
  pause's update, whose snapshot predates the accept's commit, never sees: a paused task's job
  released. For ``resume`` the same race would leave a job held by no pause, forever. Reads are
  not blocked; writers wait at most one pause's two statements.
* On SQLite, the transaction's ``BEGIN IMMEDIATE`` takes the file's write lock up front, and
  every writing statement takes it as it starts (before reading anything): one writer at a time.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from storage_adapters.checks.pauses import check_pause, check_pause_name
from storage_adapters.records import PauseKind, PauseRecord
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import SQLPlumbing

__all__ = ["SQLPauseStore"]

_KINDS = {kind.value for kind in PauseKind}


class SQLPauseStore(SQLPlumbing):
    """Pause and resume the jobs of a queue or a task, for ``SQLStorage`` to inherit."""

    @rerun_if_ended_idle
    def pause(self, kind: PauseKind, name: str, note: str, paused_by: str) -> int:
        checked, name, note, paused_by = check_pause(kind, name, note, paused_by)
        statements = self._sql.pauses
        params = {"kind": checked.value, "name": name}
        with self._transaction() as conn:
            self._lock_jobs_for_pause(conn)
            conn.execute(statements.put, {**params, "note": note, "paused_by": paused_by})
            held = int(conn.execute(statements.hold[checked], params).rowcount)
        self._after_moving(held)
        return held

    @rerun_if_ended_idle
    def resume(self, kind: PauseKind, name: str) -> int:
        checked, name = check_pause_name(kind, name)
        statements = self._sql.pauses
        params = {"kind": checked.value, "name": name}
        with self._transaction() as conn:
            self._lock_jobs_for_pause(conn)
            if not conn.execute(statements.remove, params).rowcount:
                return 0  # not paused: no job is held by it (held jobs always have a pause)
            released = int(conn.execute(statements.release[checked], params).rowcount)
        self._after_moving(released)
        return released

    def list_pauses(self) -> list[PauseRecord]:
        rows = self._rows(self._sql.pauses.listing, {})
        return [
            PauseRecord(
                kind=PauseKind(row.kind),
                name=row.name,
                note=row.note,
                paused_by=row.paused_by,
                paused_at=float(row.paused_at),
            )
            for row in rows
            if row.kind in _KINDS  # a hand-written row of another kind: listing must not crash
        ]

    def _lock_jobs_for_pause(self, conn: Connection) -> None:
        """The dialect's lock against writers of the jobs (see the module's docstring); the
        table's name comes from the validated prefix."""
        lock = self._dialect.pause_lock
        if lock:
            conn.exec_driver_sql(lock.format(jobs=self._tables.jobs.name))
