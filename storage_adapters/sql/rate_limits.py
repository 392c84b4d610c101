"""Rate limits of a queue or a task in SQL: the ``RateLimitStore`` family of ``SQLStorage``.

A limit is a row of ``{prefix}_rate_limits`` (migration 12) whose ``tat`` is the instant its next
slot is due, ``NULL`` until one is reserved. ``reserve_release_slots`` is one short transaction:
the row read under its write lock (PostgreSQL's ``FOR UPDATE``; on SQLite the transaction's
``BEGIN IMMEDIATE`` has taken the file's write lock before anything is read) together with the
storage clock, the slots computed by ``gcra.reserve_slots`` (the arithmetic's one home), and the
new ``tat`` written back. A racing reservation of the same limit waits for the commit and then
reads the ``tat`` this one wrote, so no slot is ever handed out twice. (On PostgreSQL the clock
is the statement's start, before any wait for the lock: a reservation that waited may take its
first slot a little earlier than the instant it got the row, never closer to the slots before.)

``defer`` gives claimed jobs back due at their slots, one statement per fencing token and page
(``sql/rate_limit_statements.py``), held instead where a pause holds them, as ``unclaim`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage_adapters.checks.pauses import check_pause_name
from storage_adapters.checks.rate_limits import (
    check_deferral,
    check_rate_limit,
    check_reservation,
)
from storage_adapters.gcra import reserve_slots
from storage_adapters.records import ClaimedJob, PauseKind, RateLimitRecord, Reservation
from storage_adapters.sql.idle_rerun import rerun_if_ended_idle
from storage_adapters.sql.plumbing import ADD_JOBS_PAGE_SIZE, SQLPlumbing
from storage_adapters.sql.rate_limit_statements import bind_deferred

__all__ = ["DEFER_PAGE_SIZE", "SQLRateLimitStore", "checked_deferral", "deferral_pages"]

_KINDS = {kind.value for kind in PauseKind}
#: Jobs per deferring statement, as an accept pages its jobs.
DEFER_PAGE_SIZE = ADD_JOBS_PAGE_SIZE


def checked_deferral(
    claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str
) -> dict[int, dict[str, float]]:
    """A ``defer``'s input checked (one due time per claim, each a finite number of seconds, a
    string ``note``), as the due time of each claimed id per fencing token: an id given twice
    under one token keeps its first due time."""
    dues, _ = check_deferral(claims, due_ats, note)
    by_token: dict[int, dict[str, float]] = {}
    for claim, due_at in zip(claims, dues, strict=True):
        by_token.setdefault(claim.token, {}).setdefault(claim.id, due_at)
    return by_token


def deferral_pages(deferred: dict[str, float]) -> list[tuple[list[str], list[float]]]:
    """One token's deferred jobs as pages of at most ``DEFER_PAGE_SIZE`` ids and due times."""
    ids = list(deferred)
    return [
        (
            ids[start : start + DEFER_PAGE_SIZE],
            [deferred[i] for i in ids[start : start + DEFER_PAGE_SIZE]],
        )
        for start in range(0, len(ids), DEFER_PAGE_SIZE)
    ]


class SQLRateLimitStore(SQLPlumbing):
    """Set, list, spend and end rate limits, and defer the jobs that wait for them, for
    ``SQLStorage`` to inherit."""

    def set_rate_limit(
        self, kind: PauseKind, name: str, count: int, period: float, burst: int, set_by: str
    ) -> None:
        checked, name, count, period, burst, set_by = check_rate_limit(
            kind, name, count, period, burst, set_by
        )
        params = {
            "limit_kind": checked.value,
            "limit_name": name,
            "count": count,
            "period": period,
            "burst": burst,
            "set_by": set_by,
        }
        self._changed(self._sql.rate_limits.put, params)

    def remove_rate_limit(self, kind: PauseKind, name: str) -> bool:
        checked, name = check_pause_name(kind, name)
        params = {"limit_kind": checked.value, "limit_name": name}
        return self._changed(self._sql.rate_limits.remove, params) > 0

    @rerun_if_ended_idle
    def requeue_waiting(self, kind: PauseKind, name: str) -> int:
        checked, name = check_pause_name(kind, name)
        statements = self._sql.rate_limits
        params = {"limit_kind": checked.value, "limit_name": name}
        with self._transaction() as conn:
            conn.execute(statements.forget_slots, params)
            moved = int(conn.execute(statements.requeue[checked], params).rowcount)
        self._after_moving(moved)
        return moved

    def list_rate_limits(self) -> list[RateLimitRecord]:
        return [
            RateLimitRecord(
                kind=PauseKind(row.kind),
                name=row.name,
                count=int(row._mapping["count"]),  # ``row.count`` is the tuple's method
                period=float(row.period),
                burst=int(row.burst),
                set_by=row.set_by,
                set_at=float(row.set_at),
                free_at=_free_at(row),
            )
            for row in self._rows(self._sql.rate_limits.listing, {})
            if row.kind in _KINDS  # a hand-written row of another kind: listing must not crash
        ]

    @rerun_if_ended_idle
    def reserve_release_slots(self, kind: PauseKind, name: str, count: int) -> Reservation | None:
        checked, name, wanted = check_reservation(kind, name, count)
        statements = self._sql.rate_limits
        params = {"limit_kind": checked.value, "limit_name": name}
        with self._transaction() as conn:
            row = conn.execute(statements.read_for_reservation, params).first()
            if row is None:
                return None
            now = float(row.now)
            tat = None if row.tat is None else float(row.tat)
            slots, new_tat = reserve_slots(
                tat, now, int(row._mapping["count"]), float(row.period), int(row.burst), wanted
            )
            conn.execute(statements.write_tat, {**params, "new_tat": new_tat})
        return Reservation(now, tuple(slots))

    def after_deferring(self, deferred: int) -> None:
        self._after_moving(deferred)

    @rerun_if_ended_idle
    def defer(self, claims: Sequence[ClaimedJob], due_ats: Sequence[float], note: str) -> list[str]:
        by_token = checked_deferral(claims, due_ats, note)
        statement = self._sql.rate_limits.defer
        runs = [
            {**bind_deferred(self._dialect, ids, ats), "held_token": token, "error": note}
            for token, deferred in by_token.items()
            for ids, ats in deferral_pages(deferred)
        ]
        settled: set[str] = set()
        if len(runs) == 1:  # one statement, atomic by itself
            settled.update(row[0] for row in self._driver_rows(statement, runs[0]))
        elif runs:
            with self._transaction() as conn:
                for params in runs:
                    settled.update(conn.execute(statement, params).scalars())
        return [job_id for job_id in dict.fromkeys(c.id for c in claims) if job_id in settled]


def _free_at(row: Any) -> float | None:
    """When the limit's next slot is due, if later than the listing's clock (``None``: now);
    the slot ``reserve_slots`` would hand out next, without reserving it."""
    if row.tat is None:
        return None
    now = float(row.now)
    (slot,), _ = reserve_slots(
        float(row.tat), now, int(row._mapping["count"]), float(row.period), int(row.burst), 1
    )
    return slot if slot > now else None
