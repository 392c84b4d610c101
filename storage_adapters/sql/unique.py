"""Unique jobs in SQL: the ``UniqueJobStore`` family of ``SQLStorage``.

The rule lives in the schema: ``{prefix}_jobs_unique`` (migration 11) is a unique index on
``(task, unique_key)`` of the jobs that hold a key (``SCHEDULED``, ``HELD``, ``CLAIMED``), so the
database itself refuses a second holder, whichever statement or client writes it. A job that
leaves those states leaves the index, which frees its key: enqueuing, cancelling, expiring or
failing a job needs no step of its own. Of the statements that move a job *into* them, only
``reschedule`` of a ``FAILED`` job can meet another holder (``held_key_error``); a claim given
back (``unclaim``, ``back_off``, a recovered lease) was holding its key all along.

``add_unique_job`` is one short transaction of at most three statements, none of which reads
first and then writes on what it read: ``"replace"`` moves a scheduled or held holder in one
``UPDATE … WHERE`` its key; then ``INSERT … ON CONFLICT DO NOTHING`` stores the job unless its
id or its key is taken (PostgreSQL waits there for a racing insert of the key to commit or roll
back); only when nothing was written does a read name the holder. Under PostgreSQL's READ
COMMITTED each statement sees what committed before it, so the holder read after a refused insert
finds the committed holder, unless it was released in between, or, for ``"replace"``, arrived
after the ``UPDATE``: then the steps run again (a few times at most; each round means another
client's write went through). SQLite's ``BEGIN IMMEDIATE`` runs the steps with no other writer.
"""

from __future__ import annotations

from storage_adapters.checks.unique import check_unique_new_job
from storage_adapters.errors import StorageError
from storage_adapters.records import NewJob, UniqueAdd, UniqueConflict
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import SQLPlumbing
from storage_adapters.sql.unique_statements import MOVABLE

__all__ = ["SQLUniqueJobStore"]

#: Rounds of ``add_unique_job``'s steps before giving up (each lost round is another's write).
ROUNDS = 10
_MOVABLE_STATES = frozenset(state.value for state in MOVABLE)


class SQLUniqueJobStore(SQLPlumbing):
    """Add unique jobs, for ``SQLStorage`` to inherit."""

    @rerun_if_ended_idle
    def add_unique_job(self, job: NewJob, on_conflict: UniqueConflict) -> UniqueAdd:
        key, conflict = check_unique_new_job(job, on_conflict)
        statements = self._sql.unique
        params = {
            "new_id": job.id,
            "new_task": job.task,
            "new_payload": job.payload,
            "new_due_at": float(job.due_at),
            "new_envelope": job.envelope,
            "new_queue": job.queue,
            "new_unique_key": key,
        }
        with self._transaction() as conn:
            for _ in range(ROUNDS):
                if conflict == "replace":
                    moved = conn.execute(statements.replace, params).scalar()
                    if moved is not None:
                        return UniqueAdd(moved, created=False, replaced=True)
                if conn.execute(statements.insert, params).scalar() is not None:
                    return UniqueAdd(job.id, created=True, replaced=False)
                same, holder, state = conn.execute(statements.lookup, params).one()
                if same is not None:
                    return UniqueAdd(job.id, created=False, replaced=False)
                if holder is None:
                    continue  # released since the insert was refused: the key is free again
                if conflict == "replace" and state in _MOVABLE_STATES:
                    continue  # stored after this call's update: move it now
                return UniqueAdd(holder, created=False, replaced=False)
        raise StorageError(
            f"unique_key {key!r} of task {job.task!r} changed hands {ROUNDS} times while a job "
            "was being added with it; try again"
        )
