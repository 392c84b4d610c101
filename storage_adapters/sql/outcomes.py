"""The execution-outcomes family of the ``Storage`` contract on SQL (``OutcomeStore`` in
``contract/outcomes.py``): one row per event in ``{prefix}_outcomes``, keyed by
``(job_id, at, state)``, and the counts per task and final state in ``{prefix}_outcome_counts``.

A batch is one transaction: ``INSERT … ON CONFLICT DO NOTHING RETURNING`` (so a batch sent twice
stores nothing twice, and only the new rows are counted), then one upsert per (task, state) the
batch added to. A timeline is a range of the primary key; a page of the newest final outcomes
walks ``(state, at, job_id)`` for one state, or ``(at, job_id)`` for all of them (schema version
9, see ``sql/tables.py``). Retention deletes a job's outcomes with the job
(``forget_outcomes``, called by ``sql/retention.py`` inside its purge's transaction).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage_adapters.checks import outcomes as checks
from storage_adapters.records import OutcomeEvent, OutcomeQuery, OutcomeState
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import SQLPlumbing
from storage_adapters.sql.tables import Tables

__all__ = ["SQLOutcomeStore", "forget_outcomes"]

_FINAL_VALUES = tuple(state.value for state in checks.FINAL_OUTCOMES)


def _finals() -> sa.ColumnElement[bool]:
    """``state IN (<the final states>)`` as literals, which PostgreSQL's partial index matches."""
    listed = ", ".join(f"'{value}'" for value in _FINAL_VALUES)
    return sa.literal_column(f"state IN ({listed})", sa.Boolean)


def _row(row: Any) -> OutcomeEvent:
    return checks.stored_outcome(
        row.job_id, row.task, row.state, row.at, row.worker, row.runtime, row.error, row.retry_id
    )


def forget_outcomes(conn: Connection, tables: Tables, ids_in: Any, ids: object) -> int:
    """Delete the outcomes of the jobs ``ids`` (bound as the dialect's ``ids``) on ``conn``,
    inside the caller's transaction, and take their final ones off the counts; how many."""
    outcomes, counts = tables.outcomes, tables.outcome_counts
    gone = conn.execute(
        sa.delete(outcomes)
        .where(ids_in(outcomes.c.job_id))
        .returning(outcomes.c.task, outcomes.c.state),
        {"ids": ids},
    ).all()
    tally = Counter((row.task, row.state) for row in gone if row.state in _FINAL_VALUES)
    if tally:
        conn.execute(
            sa.update(counts)
            .where(counts.c.task == sa.bindparam("t"), counts.c.state == sa.bindparam("s"))
            .values(count=counts.c.count - sa.bindparam("n", type_=sa.BigInteger)),
            [{"t": task, "s": state, "n": n} for (task, state), n in tally.items()],
        )
    return len(gone)


class SQLOutcomeStore(SQLPlumbing):
    """What workers did with released jobs: batches written, timelines, pages and counts."""

    @cached_property
    def _record_statements(self) -> tuple[sa.Executable, sa.Executable]:
        outcomes, counts = self._tables.outcomes, self._tables.outcome_counts
        insert = (
            self._dialect.insert(outcomes)
            .on_conflict_do_nothing(
                index_elements=[outcomes.c.job_id, outcomes.c.at, outcomes.c.state]
            )
            .returning(outcomes.c.task, outcomes.c.state)
        )
        add = self._dialect.insert(counts).values(
            task=sa.bindparam("task"), state=sa.bindparam("state"), count=sa.bindparam("n")
        )
        upsert = add.on_conflict_do_update(
            index_elements=[counts.c.task, counts.c.state],
            set_={"count": counts.c.count + add.excluded["count"]},
        )
        return insert, upsert

    @rerun_if_ended_idle
    def record_outcomes(self, events: Sequence[OutcomeEvent]) -> int:
        checked = checks.check_outcome_events(events)
        if not checked:
            return 0
        unique = {(e.job_id, e.at, e.state): e for e in checked}
        params = [
            {
                "job_id": e.job_id,
                "at": e.at,
                "state": e.state.value,
                "task": e.task,
                "worker": e.worker,
                "runtime": e.runtime,
                "error": e.error,
                "retry_id": e.retry_id,
            }
            for e in unique.values()
        ]
        insert, upsert = self._record_statements
        with self._transaction() as conn:
            added = conn.execute(insert, params).all()
            tally = Counter((row.task, row.state) for row in added if row.state in _FINAL_VALUES)
            if tally:
                conn.execute(
                    upsert,
                    [
                        {"task": task, "state": state, "n": n}
                        for (task, state), n in sorted(tally.items())  # one lock order
                    ],
                )
        return len(added)

    def outcome_history(self, job_id: str) -> list[OutcomeEvent]:
        (checked,) = checks.check_outcome_ids([job_id])
        outcomes = self._tables.outcomes
        statement = sa.select(outcomes).where(outcomes.c.job_id == sa.bindparam("job_id"))
        rows = self._rows(statement.order_by(outcomes.c.at), {"job_id": checked})
        return sorted((_row(row) for row in rows), key=checks.outcome_order)

    def latest_outcomes(self, job_ids: Sequence[str]) -> dict[str, OutcomeEvent]:
        ids = checks.check_outcome_ids(job_ids)
        if not ids:
            return {}
        outcomes = self._tables.outcomes
        statement = sa.select(outcomes).where(self._dialect.ids_in(outcomes.c.job_id))
        latest: dict[str, OutcomeEvent] = {}
        for row in self._rows(statement, {"ids": self._dialect.bind_ids(ids)}):
            event = _row(row)
            known = latest.get(event.job_id)
            if known is None or checks.outcome_order(event) > checks.outcome_order(known):
                latest[event.job_id] = event
        return {job_id: latest[job_id] for job_id in ids if job_id in latest}

    def outcomes_page(self, query: OutcomeQuery, limit: int) -> list[OutcomeEvent]:
        checked = checks.check_outcome_query(query)
        outcomes = self._tables.outcomes
        params: dict[str, Any] = {"limit": checks.check_page_limit(limit)}
        if checked.state is not None:
            conditions = [outcomes.c.state == sa.literal_column(f"'{checked.state.value}'")]
        else:
            conditions = [_finals()]
        if checked.task is not None:
            conditions.append(outcomes.c.task == sa.bindparam("task"))
            params["task"] = checked.task
        if checked.before is not None:
            conditions.append(
                sa.tuple_(outcomes.c.at, outcomes.c.job_id)
                < sa.tuple_(sa.bindparam("before_at"), sa.bindparam("before_id"))
            )
            params["before_at"], params["before_id"] = checked.before
        statement = (
            sa.select(outcomes)
            .where(*conditions)
            .order_by(outcomes.c.at.desc(), outcomes.c.job_id.desc())
            .limit(sa.bindparam("limit"))
        )
        return [_row(row) for row in self._rows(statement, params)]

    def outcome_counts(self) -> dict[str, dict[OutcomeState, int]]:
        counts = self._tables.outcome_counts
        found: dict[str, dict[OutcomeState, int]] = {}
        statement = sa.select(counts.c.task, counts.c.state, counts.c.count.label("n"))
        for row in self._rows(statement.where(counts.c.count > 0), {}):
            per_task = found.setdefault(row.task, dict.fromkeys(checks.FINAL_OUTCOMES, 0))
            per_task[OutcomeState(row.state)] = int(row.n)
        return dict(sorted(found.items()))
